// Package changes records every committed change of the cluster's rows
// during a chaos run: it follows GET /v1/events (server-sent events, one
// per row change, each carrying the Raft index of its entry) through the
// Go client, which resumes after the last entry it delivered whole on any
// master, across every fault. When a master no longer holds the events a
// stream would resume from (they fell out of its buffer, or it was
// restored from a snapshot past them), the stream says so with a reset
// event and the current rows: the recorder keeps those too, and counts
// the indexes it missed, so a checker that replays the log knows it
// cannot vouch for what happened between.
package changes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
)

// Gap is a span of indexes the recorder has no events of: from After
// (exclusive), the last entry it had, to Until (inclusive): the index of
// the reset event whose rows it got instead, or, for a stream that never
// caught up, the index the run ended at.
type Gap struct {
	After uint64 `json:"after"`
	Until uint64 `json:"until"`
}

// Missed is how many indexes the gap spans: an upper bound of the
// entries lost, since some of them may have changed no row.
func (g Gap) Missed() uint64 { return g.Until - g.After }

// Log is what a Recorder saw: every event in the order the stream gave
// them (index order; the events of one entry together), the gaps, and
// how often its stream had to be started again after it ended on an
// error (Restarts; resumes inside the client are not counted).
type Log struct {
	Events   []api.Event
	Gaps     []Gap
	Restarts int
}

// Last is the index of the last event recorded, 0 for none.
func (l *Log) Last() uint64 {
	if len(l.Events) == 0 {
		return 0
	}
	return l.Events[len(l.Events)-1].Index
}

// Missed is how many indexes the log's gaps span together.
func (l *Log) Missed() uint64 {
	var n uint64
	for _, g := range l.Gaps {
		n += g.Missed()
	}
	return n
}

// Write writes the log's events to path as JSON lines.
func (l *Log) Write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, e := range l.Events {
		if err = enc.Encode(e); err != nil {
			break
		}
	}
	return errors.Join(err, w.Flush(), f.Close())
}

// restartPause is how long the recorder waits before it starts a stream
// again that ended on an authoritative refusal: a master asked for an
// index past its own log (it lagged behind a partition) refuses, and the
// next stream starts at the next master.
const restartPause = 200 * time.Millisecond

// Recorder follows the event stream from index 0 until Stop.
type Recorder struct {
	// clients holds one client per master, each with the masters in
	// another order: the client's stream starts at its first master.
	clients []*client.Client
	cancel  context.CancelFunc
	done    chan struct{}

	mu     sync.Mutex
	log    Log
	reach  chan struct{} // closed and replaced at every new event
	logErr func(error)
}

// Start starts recording the changes of the cluster of masters (HTTP
// addresses), from the first entry of its log; logErr hears why a stream
// ended, for progress reports. The error is client.New's.
func Start(masters []string, logErr func(error)) (*Recorder, error) {
	if len(masters) == 0 {
		return nil, errors.New("no master addresses given")
	}
	r := &Recorder{done: make(chan struct{}), reach: make(chan struct{}), logErr: logErr}
	for i := range masters {
		cl, err := client.New(append(slices.Clone(masters[i:]), masters[:i]...), client.Options{})
		if err != nil {
			return nil, err
		}
		r.clients = append(r.clients, cl)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(ctx)
	return r, nil
}

func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	for i := 0; ctx.Err() == nil; i++ {
		s := r.clients[i%len(r.clients)].Events(ctx, client.EventQuery{After: r.last()})
		for e := range s.C() {
			r.add(e)
		}
		if err := s.Err(); ctx.Err() == nil {
			r.mu.Lock()
			r.log.Restarts++
			r.mu.Unlock()
			r.logErr(err)
			select {
			case <-ctx.Done():
			case <-time.After(restartPause):
			}
		}
	}
}

func (r *Recorder) last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Last()
}

// add records e; a reset opens a gap from the last index recorded.
func (r *Recorder) add(e api.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Op == api.OpReset {
		r.log.Gaps = append(r.log.Gaps, Gap{After: r.log.Last(), Until: e.Index})
	}
	r.log.Events = append(r.log.Events, e)
	close(r.reach)
	r.reach = make(chan struct{})
}

// Await waits until the recorder has an event at index or past it, or
// ctx ends; false when it ended first.
func (r *Recorder) Await(ctx context.Context, index uint64) bool {
	for {
		r.mu.Lock()
		last, reach := r.log.Last(), r.reach
		r.mu.Unlock()
		if last >= index {
			return true
		}
		select {
		case <-reach:
		case <-ctx.Done():
			return false
		}
	}
}

// settle is how long Stop waits for more events of the entry it last
// got: the client hands over an entry's events one by one only once all
// of them have arrived, back to back, so a pause this long means the
// entry is whole.
const settle = 250 * time.Millisecond

// Stop ends the recording, once the entry at index (or the last one it
// got, when it never reached index) is whole, and returns the log. A log
// whose stream had not reached index by then has a last gap from its last
// event to index.
func (r *Recorder) Stop(index uint64) Log {
	for {
		r.mu.Lock()
		last, reach := r.log.Last(), r.reach
		r.mu.Unlock()
		if last > index {
			break
		}
		t := time.NewTimer(settle)
		select {
		case <-reach:
			t.Stop()
			continue
		case <-t.C:
		}
		break
	}
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	if last := out.Last(); last < index {
		out.Gaps = append(out.Gaps, Gap{After: last, Until: index})
	}
	return out
}

// Summary says in one line what the log holds.
func (l *Log) Summary() string {
	s := fmt.Sprintf("%d row changes up to index %d", len(l.Events), l.Last())
	if len(l.Gaps) > 0 {
		s += fmt.Sprintf(", %d gaps missing up to %d indexes", len(l.Gaps), l.Missed())
	}
	if l.Restarts > 0 {
		s += fmt.Sprintf(", stream started again %d times", l.Restarts)
	}
	return s
}
