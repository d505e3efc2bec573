// Package events keeps the recent changes of a master's tables, as the FSM
// applies them, and hands them to subscribers: the event stream
// (GET /v1/events) and blocking reads. Every master applies the same log,
// so every master holds the same events under the same Raft indexes, and a
// subscriber that loses one master resumes from its last index on another.
//
// A Buffer holds a bounded number of events. Publishing never waits for a
// subscriber: each one queues what it has not read, up to its own bound,
// and is closed with ErrTooSlow beyond it, so a slow reader can hold up
// neither Raft's apply nor other readers.
package events

import (
	"errors"
	"fmt"
	"sync"

	"github.com/drover-project/drover/api"
)

// Batch is the events of one Raft entry, in the order the FSM made them.
type Batch struct {
	Index  uint64
	Events []api.Event
}

// Filter picks events by kind and ID; an empty set picks all.
type Filter struct {
	Kinds map[api.EventKind]bool
	IDs   map[string]bool
}

// Match reports whether f picks e.
func (f Filter) Match(e api.Event) bool {
	return (len(f.Kinds) == 0 || f.Kinds[e.Kind]) && (len(f.IDs) == 0 || f.IDs[e.ID])
}

// ErrTooSlow closes a subscriber that fell more events behind than its
// bound; ErrReset one whose master replaced its tables from a snapshot.
// Both wrap api.ErrUnavailable: the subscriber resumes from the last index
// it read, on this master or another.
var (
	ErrTooSlow = fmt.Errorf("%w: the reader fell too far behind", api.ErrUnavailable)
	ErrReset   = fmt.Errorf("%w: the tables were restored from a snapshot", api.ErrUnavailable)
)

// ErrClosed is the error of a subscriber its owner closed.
var ErrClosed = errors.New("subscription closed")

// Buffer is the held events and the subscribers. Make one with New.
type Buffer struct {
	mu      sync.Mutex
	batches []Batch
	held    int // events in batches
	max     int
	// floor is the index past which every event is held: a subscriber
	// resuming from an index below it has missed some.
	floor uint64
	subs  map[*Sub]struct{}
}

// New returns an empty Buffer that holds up to max events (at least the
// last batch, whatever its size).
func New(max int) *Buffer {
	return &Buffer{max: max, subs: map[*Sub]struct{}{}}
}

// Publish adds the events of the entry at index, which must be past every
// index published before, and queues them for every subscriber.
func (b *Buffer) Publish(index uint64, evs []api.Event) {
	if len(evs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := Batch{Index: index, Events: evs}
	b.batches = append(b.batches, batch)
	b.held += len(evs)
	for b.held > b.max && len(b.batches) > 1 {
		b.held -= len(b.batches[0].Events)
		b.floor = b.batches[0].Index
		b.batches[0] = Batch{}
		b.batches = b.batches[1:]
	}
	for s := range b.subs {
		if !s.push(batch) {
			delete(b.subs, s)
		}
	}
}

// Reset drops every held event and closes every subscriber with ErrReset:
// the tables were replaced by a snapshot at index, and nothing before it
// can be replayed.
func (b *Buffer) Reset(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches, b.held, b.floor = nil, 0, index
	for s := range b.subs {
		s.close(ErrReset)
		delete(b.subs, s)
	}
}

// Subscribe returns a subscriber that gets, first, every held batch past
// index after, then every batch published from now on, each filtered by f;
// it is closed with ErrTooSlow once more than maxPending events wait
// unread. complete is false when events past after are no longer held
// (after is older than the buffer): the subscriber then starts at the
// oldest held event, and its owner has to say so to its reader.
func (b *Buffer) Subscribe(after uint64, f Filter, maxPending int) (s *Sub, complete bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s = &Sub{b: b, filter: f, max: maxPending, after: after, ready: make(chan struct{}, 1)}
	for _, batch := range b.batches {
		if batch.Index > after {
			s.pending = append(s.pending, batch)
			s.queued += len(batch.Events)
		}
	}
	if len(s.pending) > 0 {
		s.signal()
	}
	b.subs[s] = struct{}{}
	return s, after >= b.floor
}

// Sub is one subscriber. Its methods are safe for concurrent use.
type Sub struct {
	b      *Buffer
	filter Filter
	max    int
	// after is the index the subscriber resumes from: a master that has
	// an entry in its log but has not applied it yet publishes it after
	// the subscription, and its reader had it already.
	after uint64

	mu      sync.Mutex
	pending []Batch
	queued  int
	err     error
	ready   chan struct{}
}

// push queues a batch, or closes the subscriber when it is too far behind;
// false means it is closed. Called with the buffer's lock held.
func (s *Sub) push(b Batch) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	if b.Index <= s.after {
		return true
	}
	if s.queued+len(b.Events) > s.max && s.queued > 0 {
		s.err = ErrTooSlow
		s.pending, s.queued = nil, 0
		s.signal()
		return false
	}
	s.pending = append(s.pending, b)
	s.queued += len(b.Events)
	s.signal()
	return true
}

func (s *Sub) close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		s.pending, s.queued = nil, 0
	}
	s.signal()
}

func (s *Sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready returns a channel that receives when Take has something: batches,
// or the error that closed the subscriber.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Take returns the batches queued since the last Take, each filtered (a
// batch the filter leaves empty is dropped), in index order; or, once the
// subscriber is closed, the error that closed it. Batches queued before
// the close are taken first, except after ErrTooSlow or ErrReset.
func (s *Sub) Take() ([]Batch, error) {
	s.mu.Lock()
	pending := s.pending
	s.pending, s.queued = nil, 0
	err := s.err
	s.mu.Unlock()
	if len(pending) == 0 && err != nil {
		return nil, err
	}
	out := pending[:0:0]
	for _, b := range pending {
		var evs []api.Event
		for _, e := range b.Events {
			if s.filter.Match(e) {
				evs = append(evs, e)
			}
		}
		if len(evs) > 0 {
			out = append(out, Batch{Index: b.Index, Events: evs})
		}
	}
	return out, nil
}

// Close ends the subscription; Take then returns ErrClosed.
func (s *Sub) Close() {
	s.b.mu.Lock()
	delete(s.b.subs, s)
	s.b.mu.Unlock()
	s.close(ErrClosed)
}
