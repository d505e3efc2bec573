package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// WaitDriver is a blocking read of one driver (Nomad's blocking queries):
// it answers once the driver's row changed past index, or after wait, with
// the row and the index to wait on next. Index 0 answers at once; wait 0
// is the masters' default (five minutes).
func (c *Client) WaitDriver(ctx context.Context, id string, index uint64, wait time.Duration) (*model.Driver, uint64, error) {
	q := url.Values{}
	if index != 0 {
		q.Set("index", strconv.FormatUint(index, 10))
	}
	if wait != 0 {
		q.Set("wait", wait.String())
	}
	path := api.DriverPath(id, "")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	hold := wait
	if index != 0 && hold == 0 {
		hold = 5 * time.Minute
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, nil, hold+c.opts.RequestTimeout)
	if err != nil {
		return nil, 0, err
	}
	var d model.Driver
	if err := decodeJSON(resp, &d); err != nil {
		return nil, 0, err
	}
	next, _ := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	return &d, next, nil
}

// EventQuery picks the events of a stream: those past index After, of the
// kinds and row IDs given (none: all).
type EventQuery struct {
	After uint64
	Kinds []api.EventKind
	IDs   []string
}

// EventStream reads the masters' event stream (GET /v1/events). It reads
// from one master at a time; when that master fails, or closes the stream
// (a reader too slow, a restore), it goes on from another, after the last
// Raft entry it delivered, so no event is lost and none comes twice: the
// events of one entry are delivered together, once all have arrived. A stream that resumes from an index older than the masters
// hold gets an api.OpReset event, then the current rows.
type EventStream struct {
	events chan api.Event
	done   chan struct{}
	err    error
}

// Events starts reading the event stream until ctx ends.
func (c *Client) Events(ctx context.Context, q EventQuery) *EventStream {
	s := &EventStream{events: make(chan api.Event), done: make(chan struct{})}
	go s.run(ctx, c, q)
	return s
}

// C delivers the events in index order; it is closed when the stream ends
// (Err says why).
func (s *EventStream) C() <-chan api.Event { return s.events }

// Err says why the stream ended: the context's error, or an authoritative
// refusal (*APIError) such as a malformed query. Valid once C is closed.
func (s *EventStream) Err() error {
	<-s.done
	return s.err
}

func (s *EventStream) run(ctx context.Context, c *Client, q EventQuery) {
	defer close(s.done)
	defer close(s.events)
	wait := c.opts.RetryInterval
	for i := 0; ; i++ {
		m := c.masters[i%len(c.masters)]
		progressed, err := s.read(ctx, c, m, &q)
		switch {
		case ctx.Err() != nil:
			s.err = ctx.Err()
			return
		case isAPIError(err):
			s.err = err
			return
		case progressed:
			wait = c.opts.RetryInterval
		}
		// Every master tried without progress: back off before the next
		// round.
		if i%len(c.masters) == len(c.masters)-1 {
			select {
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, c.opts.MaxRetryInterval)
		}
	}
}

// read follows the stream of master m from q.After, moving q.After past
// every entry delivered whole, until the stream ends; progressed says
// whether it delivered anything.
func (s *EventStream) read(ctx context.Context, c *Client, m string, q *EventQuery) (progressed bool, err error) {
	v := url.Values{"index": {strconv.FormatUint(q.After, 10)}}
	var kinds []string
	for _, k := range q.Kinds {
		kinds = append(kinds, string(k))
	}
	if len(kinds) > 0 {
		v.Set("kind", strings.Join(kinds, ","))
	}
	if len(q.IDs) > 0 {
		v.Set("id", strings.Join(q.IDs, ","))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.scheme+m+"/v1/events?"+v.Encode(), nil)
	if err != nil {
		return false, &APIError{Message: err.Error()}
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
			return false, errors.New(errorMessage(resp.StatusCode, b))
		}
		return false, refusal(resp.StatusCode, b, errorMessage(resp.StatusCode, b))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), int(c.opts.MaxResponseBytes))
	// The events of one entry are held until its last one, which carries
	// the entry's index as its id: an entry cut off halfway comes again
	// whole from the next master, and nothing comes twice.
	var batch []api.Event
	var name, id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name == "error" {
				return progressed, fmt.Errorf("%s: %s", m, data)
			}
			if data != "" {
				var e api.Event
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					return progressed, fmt.Errorf("%s: event: %w", m, err)
				}
				batch = append(batch, e)
			}
			if n, err := strconv.ParseUint(id, 10, 64); id != "" && err == nil {
				for _, e := range batch {
					select {
					case s.events <- e:
					case <-ctx.Done():
						return progressed, ctx.Err()
					}
				}
				batch, q.After, progressed = batch[:0], n, true
			}
			name, id, data = "", "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
	return progressed, sc.Err()
}
