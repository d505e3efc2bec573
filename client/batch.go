package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/api"
)

// Submissions made at the same time on one Client go together: while
// batchesInFlight batch requests are out, the submissions that arrive wait
// for the next one, which takes all of them (up to maxBatch), as a master
// gathers concurrent submissions into one Raft entry. A lone submission is
// sent at once, on its own, as POST /v1/drivers.
const (
	// batchesInFlight bounds the batch requests one Client has out at
	// once. One is enough: the leader commits the batches of many
	// clients, and the entries of each, in a pipeline of its own, while
	// everything submitted during one request's round trip goes in the
	// next. On the 2-core machine of docs/benchmarks.md, with 64
	// submissions in flight, one batch out at a time took 11,500 to
	// 12,200 submissions/s, two 10,800 to 11,600 and three 9,500 to
	// 10,500, as more requests carried the same submissions; at 2,000
	// submissions/s offered its median latency was no longer.
	batchesInFlight = 1
	// maxBatch bounds the submissions of one batch request; a batch
	// whose body would exceed maxBatchBody bytes is sent in halves.
	maxBatch     = 256
	maxBatchBody = api.MaxBodyBytes / 2
	// aloneFor is how long submissions go on their own after a master
	// refused the batch endpoint as unknown (one of an older release),
	// before batches are tried again: a rolling upgrade ends.
	aloneFor = time.Minute
)

// submitter gathers a Client's concurrent submissions into batch requests.
type submitter struct {
	c       *Client
	mu      sync.Mutex
	waiting []*submission
	// sending is the number of goroutines sending batches, at most
	// batchesInFlight.
	sending int
	// size is the most submissions a batch takes now: maxBatch, or after
	// a master admitted fewer (its bound on a client's submissions in
	// flight, --max-submits-per-client), as many as it admitted, doubling
	// back with each batch admitted whole.
	size atomic.Int32
	// aloneUntil (Unix ns) is set when a master refused the batch
	// endpoint as unknown: until then every submission goes on its own.
	aloneUntil atomic.Int64
}

// submission is one Submit waiting for its answer.
type submission struct {
	ctx  context.Context
	req  api.SubmitRequest
	done chan submitted
	// wait is the pause before this submission is sent again after an
	// answer that was not authoritative for it alone, and last that
	// answer, for the error of a caller that gives up.
	wait time.Duration
	last atomic.Pointer[string]
}

// submitted is what became of a submission.
type submitted struct {
	res api.SubmitResponse
	err error
}

// submit queues req (which carries its token) and waits for its answer or
// for ctx to end.
func (s *submitter) submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	if s.alone() {
		return s.c.submitOne(ctx, req)
	}
	sub := &submission{ctx: ctx, req: req, done: make(chan submitted, 1)}
	s.queue(sub)
	select {
	case r := <-sub.done:
		return r.res, r.err
	case <-ctx.Done():
		// A request of its own would end the same way: no master
		// answered for it before ctx ended.
		err := fmt.Errorf("%w: %v", ErrNoMaster, context.Cause(ctx))
		if last := sub.last.Load(); last != nil {
			err = fmt.Errorf("%w; last answer: %s", err, *last)
		}
		return api.SubmitResponse{}, err
	}
}

// alone reports whether submissions go on their own for now.
func (s *submitter) alone() bool { return time.Now().UnixNano() < s.aloneUntil.Load() }

// queue adds sub to the waiting submissions and starts a sender if fewer
// than batchesInFlight are out.
func (s *submitter) queue(sub *submission) {
	s.mu.Lock()
	s.waiting = append(s.waiting, sub)
	start := s.sending < batchesInFlight
	if start {
		s.sending++
	}
	s.mu.Unlock()
	if start {
		go s.send()
	}
}

// send sends batches of waiting submissions, one after the other, until
// none waits. Submissions whose caller gave up are dropped unsent.
func (s *submitter) send() {
	for {
		s.mu.Lock()
		var batch []*submission
		size := s.batchSize()
		for len(s.waiting) > 0 && len(batch) < size {
			sub := s.waiting[0]
			s.waiting[0] = nil
			s.waiting = s.waiting[1:]
			if sub.ctx.Err() == nil {
				batch = append(batch, sub)
			}
		}
		if len(s.waiting) == 0 {
			s.waiting = nil
		}
		if len(batch) == 0 {
			s.sending--
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.sendBatch(batch)
	}
}

// sendBatch sends one batch and hands each submission its answer, or
// queues it again after a pause when its answer was not authoritative.
func (s *submitter) sendBatch(batch []*submission) {
	if len(batch) == 1 {
		res, err := s.c.submitOne(batch[0].ctx, batch[0].req)
		batch[0].done <- submitted{res, err}
		return
	}
	if s.alone() {
		for _, sub := range batch {
			go func() {
				res, err := s.c.submitOne(sub.ctx, sub.req)
				sub.done <- submitted{res, err}
			}()
		}
		return
	}
	req := api.SubmitBatchRequest{Submissions: make([]api.SubmitRequest, len(batch))}
	for i, sub := range batch {
		req.Submissions[i] = sub.req
	}
	body, err := api.Marshal(req)
	if err != nil {
		for _, sub := range batch {
			sub.done <- submitted{err: fmt.Errorf("encode request: %w", err)}
		}
		return
	}
	if len(body) > maxBatchBody {
		s.sendBatch(batch[:len(batch)/2])
		s.sendBatch(batch[len(batch)/2:])
		return
	}
	ctx, cancel := anyAlive(batch)
	defer cancel()
	resp, err := s.c.DoRaw(ctx, http.MethodPost, api.PathSubmitBatch, body)
	var out api.SubmitBatchResponse
	if err == nil {
		err = decodeJSON(resp, &out)
		if err == nil && len(out.Results) != len(batch) {
			err = fmt.Errorf("%s answered %d results for %d submissions", resp.From, len(out.Results), len(batch))
		}
	}
	var refused *APIError
	if errors.As(err, &refused) && refused.Code == api.CodeNotFound {
		// A master that does not know the batch endpoint: send
		// these, and the submissions of the next minute, on their own.
		s.aloneUntil.Store(time.Now().Add(aloneFor).UnixNano())
		s.sendBatch(batch)
		return
	}
	busy := 0
	for i, sub := range batch {
		if err != nil {
			sub.done <- submitted{err: err}
			continue
		}
		r := out.Results[i]
		switch {
		case r.Error == nil:
			sub.done <- submitted{res: r.SubmitResponse}
		case r.Error.Code == api.CodeTooManyRequests:
			// The master admitted the others, and this answer gave
			// their slots back: the next batch may take it at once.
			busy++
			sub.last.Store(&r.Error.Error)
			s.queue(sub)
		case r.Error.Code == api.CodeUnavailable:
			sub.last.Store(&r.Error.Error)
			s.later(sub)
		default:
			status := r.Error.Code.Status()
			sub.done <- submitted{err: &APIError{Status: status, Code: r.Error.Code, Message: r.Error.Error, err: errors.Unwrap(r.Error.Err(status))}}
		}
	}
	if err == nil {
		s.resize(len(batch), busy)
	}
}

// batchSize is the most submissions the next batch takes (see size).
func (s *submitter) batchSize() int {
	if size := int(s.size.Load()); size > 0 {
		return size
	}
	return maxBatch
}

// resize sets the size of the next batches after one of n submissions
// of which busy were refused as over the master's bound: as many as it
// admitted, or twice the size once a batch of the whole size is admitted.
func (s *submitter) resize(n, busy int) {
	size := s.batchSize()
	switch {
	case busy > 0:
		s.size.Store(int32(max(n-busy, 1)))
	case n >= size:
		s.size.Store(int32(min(2*size, maxBatch)))
	}
}

// later queues sub again after its pause, which doubles each time up to
// MaxRetryInterval, as the client's rounds do.
func (s *submitter) later(sub *submission) {
	sub.wait = min(max(2*sub.wait, s.c.opts.RetryInterval), s.c.opts.MaxRetryInterval)
	time.AfterFunc(sub.wait, func() { s.queue(sub) })
}

// anyAlive returns a context that ends once the context of every
// submission of batch has ended: the batch is sent, and sent again, as
// long as one of its callers still waits.
func anyAlive(batch []*submission) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var alive atomic.Int32
	alive.Store(int32(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, sub := range batch {
		stops[i] = context.AfterFunc(sub.ctx, func() {
			if alive.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
