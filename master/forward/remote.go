package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/security/auth"
)

// maxAnswer bounds a JSON answer from the leader; the largest, a list of
// every driver asked for without a page, stays far below it with the
// tables' retention. An answer past it is refused naming it, never cut.
const maxAnswer = 256 << 20

// call is one request forwarded to the leader, the service.Leader its
// endpoint sends itself with: its context ends when the leader changes,
// and done releases it.
type call struct {
	f      *Forwarder
	ctx    context.Context
	caller auth.Caller
	// self names this master in api.HeaderForwarded; leader and base are
	// the leader's ID and URL.
	self, leader, base string
	cancel             context.CancelFunc
	// kept is set when an answer's body outlives the call, which the
	// body's Close then ends.
	kept bool
}

// to starts a call to the leader named in l, or says why there is none:
// a request that was forwarded already is not forwarded again, so two
// masters with different ideas of the leader cannot bounce it between
// them.
func (f *Forwarder) to(ctx context.Context, c auth.Caller, l service.Leadership) (*call, error) {
	switch {
	case c.ForwardedBy != "":
		return nil, api.Errorf(api.ErrNoLeader, "master %s is not the leader", l.Self)
	case l.LeaderID == "" || l.LeaderHTTP == "":
		return nil, api.Errorf(api.ErrNoLeader, "master %s knows no leader", l.Self)
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		tick := time.NewTicker(leaderPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if f.lead().LeaderID != l.LeaderID {
					cancel()
					return
				}
			}
		}
	}()
	base := (&url.URL{Scheme: f.scheme, Host: l.LeaderHTTP}).String()
	return &call{f: f, ctx: ctx, caller: c, self: l.Self, leader: l.LeaderID, base: base, cancel: cancel}, nil
}

// done ends the call unless an answer's body still streams.
func (cl *call) done() {
	if !cl.kept {
		cl.cancel()
	}
}

// do sends one request to the leader and returns its answer when it is a
// success; any other answer, or none, is the error it stands for.
func (cl *call) do(method, path string, query url.Values, body io.Reader, header http.Header) (*http.Response, error) {
	u := cl.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(cl.ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set(api.HeaderForwarded, cl.self)
	if cl.caller.Client != "" {
		req.Header.Set(api.HeaderClient, cl.caller.Client)
	}
	cl.caller.SetCredential(req.Header)
	resp, err := cl.f.http.Do(req)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, api.Errorf(api.ErrTooLarge, "request body exceeds %d bytes", mbe.Limit)
		}
		// A dial that failed sent nothing: the leader cannot have
		// acted on the request. Any later failure leaves that open.
		sentinel := api.ErrUnavailable
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			sentinel = api.ErrNoLeader
		}
		return nil, api.Errorf(sentinel, "master %s could not reach leader %s: %v", cl.self, cl.leader, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e api.Error
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("leader %s answered %s", cl.leader, resp.Status)
	}
	return nil, e.Err(resp.StatusCode)
}

// JSON implements service.Leader.
func (cl *call) JSON(method, path string, query url.Values, in, out any) error {
	var body io.Reader
	var header http.Header
	if in != nil {
		b, err := api.Marshal(in)
		if err != nil {
			return err
		}
		body, header = bytes.NewReader(b), http.Header{"Content-Type": {api.ContentTypeJSON}}
	}
	resp, err := cl.do(method, path, query, body, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return cl.decode(resp, out)
}

func (cl *call) decode(resp *http.Response, out any) error {
	tooLarge := api.TooLarge("the answer of leader "+cl.leader, maxAnswer, "the bound on an answer a master forwards; ask for a page")
	if err := json.NewDecoder(api.Bounded(resp.Body, maxAnswer, tooLarge)).Decode(out); err != nil {
		if errors.Is(err, api.ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%w: answer of leader %s: %v", api.ErrUnavailable, cl.leader, err)
	}
	return nil
}

// keep hands the call's end to the answer's body: the body streams after
// the call returns.
func (cl *call) keep(body io.ReadCloser) io.ReadCloser {
	cl.kept = true
	return &releasingBody{ReadCloser: body, release: cl.cancel}
}

type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// Log implements service.Leader, as the /v1 logs endpoints take it.
func (cl *call) Log(path string, q service.LogQuery) (*service.Log, error) {
	resp, err := cl.do(http.MethodGet, path, q.Values(), nil, nil)
	if err != nil {
		return nil, err
	}
	l := &service.Log{Body: cl.keep(resp.Body)}
	l.Start, l.Size = api.LogHeaders(resp.Header, q.Offset)
	return l, nil
}

// Watch implements service.Leader: an app watch held by the leader.
func (cl *call) Watch(path, etag string) (service.AppWatch, error) {
	resp, err := cl.do(http.MethodGet, path, nil, nil, http.Header{"If-None-Match": {etag}})
	if err != nil {
		return service.AppWatch{}, err
	}
	defer resp.Body.Close()
	w := service.AppWatch{ETag: resp.Header.Get("ETag")}
	return w, cl.decode(resp, &w.Status)
}

// Snapshot implements service.Leader.
func (cl *call) Snapshot() (*service.Snapshot, error) {
	resp, err := cl.do(http.MethodGet, api.PathSnapshot, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	name := "drover.snap"
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		name = params["filename"]
	}
	return &service.Snapshot{Name: name, Body: cl.keep(resp.Body)}, nil
}

// Restore implements service.Leader.
func (cl *call) Restore(archive io.Reader, out any) error {
	resp, err := cl.do(http.MethodPost, api.PathSnapshot, nil, archive, http.Header{"Content-Type": {api.ContentTypeTar}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return cl.decode(resp, out)
}
