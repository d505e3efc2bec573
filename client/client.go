// Package client talks to a Drover master quorum over HTTP. Like Spark's
// tryRegisterAllMasters, it sends each request to every master at once and
// takes the first authoritative answer: a success, or a refusal that only the
// leader could give. Answers that say "no leader here" (503) or connection
// failures are not authoritative; the client then tries again in rounds until
// its context ends.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/transport"
)

// ErrUnavailable is returned, wrapped with the last reason seen, when no
// master gave an authoritative answer before the context ended: none could
// be reached, or none knew a leader.
var ErrUnavailable = errors.New("no master answered with a leader")

// APIError is an authoritative refusal: a 4xx, or a 5xx other than 503.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Message }

// Options tune a Client. The zero value is usable.
type Options struct {
	// BindIP is the source address of every connection ("" lets the
	// kernel choose).
	BindIP string
	// RequestTimeout bounds one request to one master (default 10s).
	RequestTimeout time.Duration
	// RetryInterval is the pause between rounds when no master answered
	// authoritatively (default 100ms); it doubles after each round up to
	// MaxRetryInterval (default 1s).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// Sticky sends each request first to the master that answered last,
	// and to all masters once it fails or HedgeAfter passes without an
	// answer. Workers use it for their steady heartbeat; the CLI fans out
	// every time.
	Sticky bool
	// HedgeAfter is how long a sticky request waits for the preferred
	// master before it is also sent to the others (default 3s: longer than
	// a master holds a heartbeat long poll).
	HedgeAfter time.Duration
	// MaxResponseBytes bounds a response body (default 64 MiB).
	MaxResponseBytes int64
}

// Client is safe for concurrent use.
type Client struct {
	masters []string
	opts    Options
	http    *http.Client

	mu        sync.Mutex
	preferred string
}

// New returns a client for the given masters, each host:port of a master's
// HTTP listener (an http:// prefix is accepted and ignored).
func New(masters []string, opts Options) (*Client, error) {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 100 * time.Millisecond
	}
	if opts.MaxRetryInterval < opts.RetryInterval {
		opts.MaxRetryInterval = max(time.Second, opts.RetryInterval)
	}
	if opts.HedgeAfter <= 0 {
		opts.HedgeAfter = 3 * time.Second
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 64 << 20
	}
	var ms []string
	for _, m := range masters {
		m = strings.TrimSpace(strings.TrimPrefix(m, "http://"))
		if m == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(m); err != nil || port == "" {
			return nil, fmt.Errorf("master address %q is not host:port", m)
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, errors.New("no master addresses given")
	}
	return &Client{masters: ms, opts: opts, http: transport.NewHTTPClient(opts.BindIP, 0)}, nil
}

// Response is a raw authoritative answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// From is the master that answered.
	From string
}

// Do sends a JSON request (in may be nil) and decodes a 2xx answer into out
// (which may be nil). A refusal is an *APIError; no authoritative answer
// before ctx ends is ErrUnavailable.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	resp, err := c.DoRaw(ctx, method, path, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("decode answer from %s: %w", resp.From, err)
	}
	return nil
}

// DoRaw is Do without JSON: it returns the first authoritative 2xx answer as
// bytes.
//
// Each master is tried on its own: one that answers without authority (503,
// a connection error) is asked again after a back-off, while a master that
// does not answer at all (paused, cut off) holds up no one. Retries reuse
// the request as is, so writes must be idempotent (submissions carry a
// token).
func (c *Client) DoRaw(ctx context.Context, method, path string, body []byte) (*Response, error) {
	return c.do(ctx, method, path, body, nil)
}

// do is DoRaw with extra request headers.
func (c *Client) do(ctx context.Context, method, path string, body []byte, header http.Header) (*Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		master string
		resp   *Response
		err    error
	}
	results := make(chan result)
	send := func(m string) {
		go func() {
			resp, err := c.one(ctx, m, method, path, body, header)
			select {
			case results <- result{m, resp, err}:
			case <-ctx.Done():
			}
		}()
	}
	retry := make(chan string)
	later := func(m string, d time.Duration) {
		time.AfterFunc(d, func() {
			select {
			case retry <- m:
			case <-ctx.Done():
			}
		})
	}

	sent := map[string]bool{}
	fanOut := func() {
		for _, m := range c.masters {
			if !sent[m] {
				sent[m] = true
				send(m)
			}
		}
	}
	var hedge <-chan time.Time
	if p := c.preferredMaster(); c.opts.Sticky && p != "" {
		sent[p] = true
		send(p)
		t := time.NewTimer(c.opts.HedgeAfter)
		defer t.Stop()
		hedge = t.C
	} else {
		fanOut()
	}
	waits := map[string]time.Duration{}
	reasons := map[string]string{}
	for {
		select {
		case r := <-results:
			if r.resp != nil || isAPIError(r.err) {
				return r.resp, r.err
			}
			reasons[r.master] = r.err.Error()
			fanOut()
			w := waits[r.master]
			if w == 0 {
				w = c.opts.RetryInterval
			}
			waits[r.master] = min(w*2, c.opts.MaxRetryInterval)
			later(r.master, w)
		case m := <-retry:
			send(m)
		case <-hedge:
			fanOut()
		case <-ctx.Done():
			var rs []string
			for _, m := range c.masters {
				if r, ok := reasons[m]; ok {
					rs = append(rs, r)
				} else if sent[m] {
					rs = append(rs, m+": no answer")
				}
			}
			return nil, fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(rs, "; "))
		}
	}
}

func (c *Client) preferredMaster() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.preferred
}

func isAPIError(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr)
}

// one sends the request to one master.
func (c *Client) one(ctx context.Context, master, method, path string, body []byte, header http.Header) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+master+path, rd)
	if err != nil {
		return nil, &APIError{Status: 0, Message: err.Error()}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hr, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", master, rootCause(err))
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(io.LimitReader(hr.Body, c.opts.MaxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %v", master, err)
	}
	if hr.StatusCode == http.StatusServiceUnavailable {
		return nil, fmt.Errorf("%s: %s", master, errorMessage(hr.StatusCode, b))
	}
	c.mu.Lock()
	c.preferred = master
	c.mu.Unlock()
	if hr.StatusCode >= 300 {
		return nil, &APIError{Status: hr.StatusCode, Message: errorMessage(hr.StatusCode, b)}
	}
	return &Response{Status: hr.StatusCode, Header: hr.Header, Body: b, From: master}, nil
}

func errorMessage(status int, body []byte) string {
	var e api.Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	msg := strings.TrimSpace(string(body))
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return msg
}

// rootCause strips url.Error's "Post \"http://...\":" prefix, which repeats
// what the caller already knows.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
