package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/transport"
)

// OpenBlob opens the uploaded file whose SHA-256 is sum (64 lowercase hex
// digits) in the masters' store (GET api.BlobPath(sum)) and returns its
// bytes as a stream, which the caller reads, verifies against sum (no
// master checks what it sends) and closes.
//
// Uploads are copied to some masters only, so OpenBlob asks one master at
// a time, the one that answered last first, and moves on when a master
// answers that it holds no such file (404), has no time for it (503, 429)
// or cannot be reached. RequestTimeout bounds the wait for each master's
// answer, not the reading of the body, which only ctx bounds.
//
// Errors: one that wraps api.ErrUnknownBlob when every master answered
// 404; ErrNoMaster, with each master's reason, when some master gave no
// answer, so a later try may find the file; and an *APIError for any other
// refusal (403, 400), which no retry changes.
func (c *Client) OpenBlob(ctx context.Context, sum string) (io.ReadCloser, error) {
	order := c.masters
	if p := c.preferredMaster(); p != "" {
		order = append([]string{p}, slices.DeleteFunc(slices.Clone(c.masters), func(m string) bool { return m == p })...)
	}
	var reasons []string
	missing := 0
	for _, m := range order {
		body, err := c.openBlob(ctx, m, sum)
		switch {
		case err == nil:
			return body, nil
		case errors.Is(err, errNoSuchBlob):
			missing++
		case isAPIError(err):
			return nil, err
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %v", ErrNoMaster, ctx.Err())
		}
		reasons = append(reasons, err.Error())
	}
	if missing == len(order) {
		return nil, fmt.Errorf("%w %s: no master holds it", api.ErrUnknownBlob, sum)
	}
	return nil, fmt.Errorf("%w: %s", ErrNoMaster, strings.Join(reasons, "; "))
}

// errNoSuchBlob is a master's 404 to a blob: another master may hold it.
var errNoSuchBlob = errors.New("no such upload")

// openBlob asks master m for blob sum; the body it returns cancels the
// request when closed.
func (c *Client) openBlob(ctx context.Context, m, sum string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.scheme+m+api.BlobPath(sum), nil)
	if err != nil {
		cancel()
		return nil, &APIError{Message: err.Error()}
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	// The timer bounds the wait for the answer's header only: a large
	// file may take longer than RequestTimeout to arrive.
	timer := time.AfterFunc(c.opts.RequestTimeout, cancel)
	hr, err := c.http.Do(req)
	if !timer.Stop() {
		if err == nil {
			hr.Body.Close()
		}
		err = fmt.Errorf("no answer within %s", c.opts.RequestTimeout)
	}
	if err != nil {
		cancel()
		if refusedByTLS(err) {
			return nil, &APIError{Message: fmt.Sprintf("%s: %v", m, transport.RootCause(err))}
		}
		return nil, fmt.Errorf("%s: %v", m, transport.RootCause(err))
	}
	if hr.StatusCode == http.StatusOK {
		c.mu.Lock()
		c.preferred = m
		c.mu.Unlock()
		return &cancelOnClose{ReadCloser: hr.Body, cancel: cancel}, nil
	}
	defer cancel()
	defer hr.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(hr.Body, 64<<10))
	msg := errorMessage(hr.StatusCode, b)
	switch hr.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w: %s", m, errNoSuchBlob, msg)
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return nil, fmt.Errorf("%s: %s", m, msg)
	}
	return nil, refusal(hr.StatusCode, b, fmt.Sprintf("%s: %s", m, msg))
}

// cancelOnClose ends a request's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
