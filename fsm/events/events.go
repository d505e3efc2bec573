// Package events keeps the recent changes of a master's tables, as the FSM
// applies them, and hands them to subscribers: the event stream
// (GET /v1/events) and blocking reads. Every master applies the same log,
// so every master holds the same events under the same Raft indexes, and a
// subscriber that loses one master resumes from its last index on another.
//
// A Buffer holds a bounded number of events, and a bounded number of
// bytes of them by their estimated size (Size). Publishing never waits
// for a subscriber: each one queues what it has not read, up to its own
// bound in events and the buffer's in bytes, and is closed with
// ErrTooSlow beyond either, so a slow reader can hold up neither Raft's
// apply nor other readers, nor keep more of the rows alive than the
// buffer would.
package events

import (
	"errors"
	"fmt"
	"sync"

	"github.com/drover-project/drover/model"
)

// Batch is the events of one Raft entry, in the order the FSM made them.
type Batch struct {
	Index  uint64
	Events []model.Event
	// bytes is the sum of the events' Size, set by Publish.
	bytes int64
}

// Filter picks events by kind and ID; an empty set picks all.
type Filter struct {
	Kinds map[model.EventKind]bool
	IDs   map[string]bool
}

// Match reports whether f picks e.
func (f Filter) Match(e model.Event) bool {
	return (len(f.Kinds) == 0 || f.Kinds[e.Kind]) && (len(f.IDs) == 0 || f.IDs[e.ID])
}

// ErrTooSlow closes a subscriber that fell more events behind than its
// bound; ErrReset one whose master replaced its tables from a snapshot.
// Both wrap model.ErrUnavailable: the subscriber resumes from the last index
// it read, on this master or another.
var (
	ErrTooSlow = fmt.Errorf("%w: the reader fell too far behind", model.ErrUnavailable)
	ErrReset   = fmt.Errorf("%w: the tables were restored from a snapshot", model.ErrUnavailable)
)

// ErrClosed is the error of a subscriber its owner closed.
var ErrClosed = errors.New("subscription closed")

// Bounds bound what a Buffer holds: at most Events events, and events
// of at most Bytes bytes in all by their Size (0: no bound in bytes).
// Beyond either the oldest batches go first; the latest batch is always
// held, whatever its size.
type Bounds struct {
	Events int
	Bytes  int64
}

// Buffer is the held events and the subscribers. Make one with New.
type Buffer struct {
	mu      sync.Mutex
	batches []Batch
	held    int   // events in batches
	bytes   int64 // their Size
	bounds  Bounds
	// floor is the index past which every event is held: a subscriber
	// resuming from an index below it has missed some.
	floor uint64
	subs  map[*Sub]struct{}
}

// New returns an empty Buffer that holds what b allows (at least the
// last batch, whatever its size).
func New(b Bounds) *Buffer {
	return &Buffer{bounds: b, subs: map[*Sub]struct{}{}}
}

// over reports whether held events and bytes exceed the bounds.
func (b Bounds) over(events int, bytes int64) bool {
	return events > b.Events || (b.Bytes > 0 && bytes > b.Bytes)
}

// Publish adds the events of the entry at index, which must be past every
// index published before, and queues them for every subscriber.
func (b *Buffer) Publish(index uint64, evs []model.Event) {
	if len(evs) == 0 {
		return
	}
	batch := Batch{Index: index, Events: evs}
	for _, e := range evs {
		batch.bytes += Size(e)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = append(b.batches, batch)
	b.held += len(evs)
	b.bytes += batch.bytes
	for b.bounds.over(b.held, b.bytes) && len(b.batches) > 1 {
		b.held -= len(b.batches[0].Events)
		b.bytes -= b.batches[0].bytes
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
	b.batches, b.held, b.bytes, b.floor = nil, 0, 0, index
	for s := range b.subs {
		s.close(ErrReset)
		delete(b.subs, s)
	}
}

// Subscribe returns a subscriber that gets, first, every held batch past
// index after, then every batch published from now on, each filtered by f;
// it is closed with ErrTooSlow once more than maxPending events, or more
// bytes of them than the buffer holds (Bounds.Bytes), wait unread. complete is false when events past after are no longer held
// (after is older than the buffer): the subscriber then starts at the
// oldest held event, and its owner has to say so to its reader.
func (b *Buffer) Subscribe(after uint64, f Filter, maxPending int) (s *Sub, complete bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s = &Sub{b: b, filter: f, max: Bounds{Events: maxPending, Bytes: b.bounds.Bytes}, after: after, ready: make(chan struct{}, 1)}
	for _, batch := range b.batches {
		if batch.Index > after {
			s.queue(batch)
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
	max    Bounds
	// after is the index the subscriber resumes from: a master that has
	// an entry in its log but has not applied it yet publishes it after
	// the subscription, and its reader had it already.
	after uint64

	mu      sync.Mutex
	pending []Batch
	queued  int   // events in pending
	bytes   int64 // their Size
	err     error
	ready   chan struct{}
}

// queue appends a batch to pending. Called with s.mu held, or before s is
// shared.
func (s *Sub) queue(b Batch) {
	s.pending = append(s.pending, b)
	s.queued += len(b.Events)
	s.bytes += b.bytes
}

// drop empties pending. Called with s.mu held.
func (s *Sub) drop() {
	s.pending, s.queued, s.bytes = nil, 0, 0
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
	if s.max.over(s.queued+len(b.Events), s.bytes+b.bytes) && s.queued > 0 {
		s.err = ErrTooSlow
		s.drop()
		s.signal()
		return false
	}
	s.queue(b)
	s.signal()
	return true
}

func (s *Sub) close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		s.drop()
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
	s.drop()
	err := s.err
	s.mu.Unlock()
	if len(pending) == 0 && err != nil {
		return nil, err
	}
	out := pending[:0:0]
	for _, b := range pending {
		var evs []model.Event
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
