package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// NewToken returns a fresh random submission token (128 bits, hex).
func NewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// Submit asks for a new driver. A request without a token gets a fresh one,
// and retries within Submit reuse it, so a timeout or a failover never
// creates a second driver. A request that names no namespace goes into
// Options.Namespace.
//
// Submissions made concurrently on one Client travel together: while
// earlier ones are out, those that arrive are gathered into the next
// batch request (POST /v1/drivers/batch, api.SubmitBatchRequest), each
// still with its own token and its own answer. A lone submission goes at
// once, on its own. Options.NoBatching sends each on its own always.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	if req.Token == "" {
		req.Token = NewToken()
	}
	if req.Namespace == "" {
		req.Namespace = c.opts.Namespace
	}
	if c.opts.NoBatching {
		return c.submitOne(ctx, req)
	}
	return c.submits.submit(ctx, req)
}

// submitOne sends one submission as a request of its own.
func (c *Client) submitOne(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	var out api.SubmitResponse
	err := call(ctx, c, api.V1SubmitDriver, api.V1SubmitDriver.Pattern, req, &out)
	return out, err
}

// driverPath is route's path naming id, once id is a driver ID: an ID of
// another form, or of 100 KB, is refused here with the error a master's
// refusal decodes to (api.ErrInvalidRequest, reading as the ids
// package's one line), before any request
// (one past the masters' bound on a request's header is not even
// answered reliably: its connection may be reset instead).
func driverPath(route api.Route, id string) (string, error) {
	if err := ids.CheckDriver(id); err != nil {
		return "", api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	return route.Path(id), nil
}

// appPath is driverPath for an app ID.
func appPath(route api.Route, id string) (string, error) {
	if err := ids.CheckApp(id); err != nil {
		return "", api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	return route.Path(id), nil
}

// Driver returns one driver's row (linearizable read). An id that is
// not a driver ID is an error wrapping api.ErrInvalidRequest, and no request
// is made.
func (c *Client) Driver(ctx context.Context, id string) (*model.Driver, error) {
	p, err := driverPath(api.V1Driver.Route, id)
	if err != nil {
		return nil, err
	}
	d := new(model.Driver)
	if err := call(ctx, c, api.V1Driver, p, api.NoBody{}, &d); err != nil {
		return nil, err
	}
	return d, nil
}

// Drivers returns every driver's row (linearizable reads, a page at a
// time: ListDrivers).
func (c *Client) Drivers(ctx context.Context) ([]*model.Driver, error) {
	ds := []*model.Driver{}
	err := c.ListDrivers(ctx, api.ListQuery{}, func(page []*model.Driver) error {
		ds = append(ds, page...)
		return nil
	})
	return ds, err
}

// ListDrivers hands each the drivers q keeps (api.ListQuery: states, a
// name glob, a worker), a page at a time in ID order, as the masters
// filter and page them: q.Limit rows a page, api.DefaultListLimit when
// 0. Each page is a linearizable read that any master may answer and
// starts after the last driver of the page before, so a list rides
// through a failover without a row twice or missed; a driver submitted
// meanwhile shows when its ID sorts after the pages read. An error from
// each ends the list with it.
func (c *Client) ListDrivers(ctx context.Context, q api.ListQuery, each func([]*model.Driver) error) error {
	return listPages(ctx, c, api.PathDrivers, q, func(p api.DriverPage) ([]*model.Driver, string) { return p.Drivers, p.Next }, each)
}

// listPages reads the pages of the list at path one after another, from
// q.Cursor on, handing each page's rows (rows takes them and the next
// cursor out of a page P) to each.
func listPages[P, T any](ctx context.Context, c *Client, path string, q api.ListQuery, rows func(P) ([]T, string), each func([]T) error) error {
	if q.Limit == 0 {
		q.Limit = api.DefaultListLimit
	}
	for {
		var p P
		if err := c.Do(ctx, http.MethodGet, path+"?"+q.Values().Encode(), nil, &p); err != nil {
			return err
		}
		page, next := rows(p)
		if err := each(page); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		q.Cursor = next
	}
}

// Kill kills a driver. Killing a driver that is already KILLED succeeds; one
// that ended otherwise is an *APIError wrapping model.ErrDriverEnded. An
// id that is not a driver ID is refused as Driver refuses it.
func (c *Client) Kill(ctx context.Context, id string) error {
	p, err := driverPath(api.V1KillDriver.Route, id)
	if err != nil {
		return err
	}
	return call(ctx, c, api.V1KillDriver, p, api.NoBody{}, nil)
}

// LogInfo says where a part of a log sits in its stream, which counts
// bytes from 0 across rotations (Nomad's logs block, runner.LogFileName).
type LogInfo struct {
	// Start is the offset of the part's first byte: the offset asked
	// for or, when the bytes there were rotated away, where the stream
	// now starts. The next part is at Start plus the part's length.
	Start int64
	// Size is the stream's length when the worker answered, rotated
	// bytes included.
	Size int64
}

// Logs returns the bytes of a driver's stdout (or stderr) from offset on, as
// the worker of the given attempt (0: the latest) holds them, and where
// they sit in the stream. A log the cluster can no longer serve (the
// worker is gone, or removed the ended attempt's directory) is an error
// wrapping api.ErrGone. An id that is not a driver ID is refused as
// Driver refuses it.
func (c *Client) Logs(ctx context.Context, id string, stderr bool, offset int64, attempt int) ([]byte, LogInfo, error) {
	p, err := driverPath(api.V1DriverLogs, id)
	if err != nil {
		return nil, LogInfo{}, err
	}
	q := logQuery(stderr, offset)
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	return c.logs(ctx, p+"?"+q.Encode(), offset)
}

// ExecutorLogs is Logs for executor executor of app appID; an appID that
// is not an app ID is refused before any request.
func (c *Client) ExecutorLogs(ctx context.Context, appID string, executor int, stderr bool, offset int64) ([]byte, LogInfo, error) {
	if _, err := appPath(api.V1ExecutorLogs, appID); err != nil {
		return nil, LogInfo{}, err
	}
	p := api.ExecutorLogsPath(appID, executor)
	return c.logs(ctx, p+"?"+logQuery(stderr, offset).Encode(), offset)
}

func logQuery(stderr bool, offset int64) url.Values {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "stream": {"stdout"}}
	if stderr {
		q.Set("stream", "stderr")
	}
	return q
}

func (c *Client) logs(ctx context.Context, path string, offset int64) ([]byte, LogInfo, error) {
	resp, err := c.DoRaw(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, LogInfo{}, err
	}
	var li LogInfo
	li.Start, li.Size = api.LogHeaders(resp.Header, offset)
	return resp.Body, li, nil
}

// State returns the cluster view from /v1/state of whichever master answers
// first (stale: each master describes itself).
func (c *Client) State(ctx context.Context) (*api.State, error) {
	var s api.State
	err := call(ctx, c, api.V1State, api.V1State.Pattern+"?stale=true", api.NoBody{}, &s)
	return &s, err
}
