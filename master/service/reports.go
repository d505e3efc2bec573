package service

import (
	"errors"
	"sync"

	"github.com/drover-project/drover/model"
)

// maxReportBatch bounds the workers' reports in one ReportBatch entry, so
// that an entry stays far below fsm.MaxCommandSize in the common case; a
// batch that still encodes too large is split (commitReports).
const maxReportBatch = 256

// reportBatcher gathers the reports of concurrent heartbeats into few
// Raft entries (group commit): while one batch commits, the reports that
// arrive wait and go together in the next. A report that arrives alone
// commits at once, as its own ReportAttempts entry, so a quiet cluster
// sees no delay and writes the entries it always wrote.
type reportBatcher struct {
	// apply commits one command through Raft (Core.Apply).
	apply   func(model.Command) (any, error)
	mu      sync.Mutex
	queue   []*reportCall
	running bool
}

// reportCall is one heartbeat's reports waiting for their commit.
type reportCall struct {
	r    model.ReportAttempts
	err  error
	done chan struct{}
}

// commit commits one worker's reports, alone or in a batch with
// other workers', and returns once they are committed and applied, or
// with the error that kept them from it (api.ErrUnavailable from Raft:
// the worker resends them). Every report of a batch has the same
// outcome.
func (b *reportBatcher) commit(r model.ReportAttempts) error {
	c := &reportCall{r: r, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	<-c.done
	return c.err
}

// flush commits the queued reports, up to maxReportBatch workers'
// per entry and one entry at a time, until the queue is empty.
func (b *reportBatcher) flush() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxReportBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		calls := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.commitBatch(calls)
	}
}

// commitBatch commits calls as one entry: a ReportAttempts for one, a
// ReportBatch for more. A batch too large to encode is split in halves,
// so no worker's reports are refused for the company they came in.
func (b *reportBatcher) commitBatch(calls []*reportCall) {
	var err error
	if len(calls) == 1 {
		_, err = b.apply(&calls[0].r)
	} else {
		batch := model.ReportBatch{Reports: make([]model.ReportAttempts, len(calls))}
		for i, c := range calls {
			batch.Reports[i] = c.r
		}
		_, err = b.apply(&batch)
		if errors.Is(err, model.ErrInvalidCommand) {
			b.commitBatch(calls[:len(calls)/2])
			b.commitBatch(calls[len(calls)/2:])
			return
		}
	}
	for _, c := range calls {
		c.err = err
		close(c.done)
	}
}
