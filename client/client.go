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
	// falling back to all masters at once only when it fails. Workers use
	// it for their steady heartbeat; the CLI fans out every time.
	Sticky bool
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
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 64 << 20
	}
	var ms []string
	for _, m := range masters {
		m = strings.TrimSpace(strings.TrimPrefix(m, "http://"))
		if m != "" {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("no master addresses given")
	}
	return &Client{masters: ms, opts: opts, http: transport.NewHTTPClient(opts.BindIP, 0)}, nil
}

// Masters returns the master addresses the client uses.
func (c *Client) Masters() []string { return append([]string(nil), c.masters...) }

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
func (c *Client) DoRaw(ctx context.Context, method, path string, body []byte) (*Response, error) {
	wait := c.opts.RetryInterval
	var last error
	for {
		resp, err := c.round(ctx, method, path, body)
		if resp != nil {
			return resp, nil
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return nil, err
		}
		last = err
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
		case <-t.C:
		}
		wait = min(wait*2, c.opts.MaxRetryInterval)
	}
}

// round tries the preferred master alone (when sticky), then all masters at
// once. It returns an authoritative answer, an *APIError, or the reason no
// master was authoritative.
func (c *Client) round(ctx context.Context, method, path string, body []byte) (*Response, error) {
	if c.opts.Sticky {
		c.mu.Lock()
		p := c.preferred
		c.mu.Unlock()
		if p != "" {
			resp, err := c.one(ctx, p, method, path, body)
			if resp != nil || isAPIError(err) {
				return resp, err
			}
		}
	}
	type result struct {
		resp *Response
		err  error
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(c.masters))
	for _, m := range c.masters {
		go func(m string) {
			resp, err := c.one(rctx, m, method, path, body)
			results <- result{resp, err}
		}(m)
	}
	var reasons []string
	for range c.masters {
		r := <-results
		if r.resp != nil || isAPIError(r.err) {
			return r.resp, r.err
		}
		reasons = append(reasons, r.err.Error())
	}
	return nil, errors.New(strings.Join(reasons, "; "))
}

func isAPIError(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr)
}

// one sends the request to one master.
func (c *Client) one(ctx context.Context, master, method, path string, body []byte) (*Response, error) {
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
