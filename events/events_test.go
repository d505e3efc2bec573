package events

import (
	"errors"
	"testing"

	"github.com/drover-project/drover/api"
)

func ev(index uint64, kind api.EventKind, id string) api.Event {
	return api.Event{Index: index, Kind: kind, ID: id, Op: api.OpUpsert}
}

func indexes(bs []Batch) []uint64 {
	var out []uint64
	for _, b := range bs {
		out = append(out, b.Index)
	}
	return out
}

// A subscriber gets the held batches past its index, then every new one,
// in order and filtered; one resuming from before what is held is told so.
func TestSubscribeReplaysThenFollows(t *testing.T) {
	b := New(4)
	b.Publish(3, []api.Event{ev(3, api.EventDriver, "d1"), ev(3, api.EventWorker, "w1")})
	b.Publish(5, []api.Event{ev(5, api.EventDriver, "d2")})
	s, complete := b.Subscribe(3, Filter{}, 100)
	if !complete {
		t.Fatal("resuming from 3 with everything past 3 held: incomplete")
	}
	b.Publish(7, []api.Event{ev(7, api.EventDriver, "d1")})
	got, err := s.Take()
	if err != nil || len(got) != 2 || got[0].Index != 5 || got[1].Index != 7 {
		t.Fatalf("Take = %v, %v; want batches 5 and 7", indexes(got), err)
	}
	// The buffer holds 4 events: publishing 2 more drops batch 3.
	b.Publish(9, []api.Event{ev(9, api.EventApp, "a1"), ev(9, api.EventApp, "a2")})
	if _, complete := b.Subscribe(2, Filter{}, 100); complete {
		t.Fatal("resuming from 2 after batch 3 was dropped: complete")
	}
	if _, complete := b.Subscribe(3, Filter{}, 100); !complete {
		t.Fatal("resuming from 3 (all past it held): incomplete")
	}
	f := Filter{Kinds: map[api.EventKind]bool{api.EventDriver: true}, IDs: map[string]bool{"d1": true}}
	s2, _ := b.Subscribe(0, f, 100)
	got, _ = s2.Take()
	if len(got) != 1 || got[0].Index != 7 || len(got[0].Events) != 1 || got[0].Events[0].ID != "d1" {
		t.Fatalf("filtered replay = %+v, want d1 at 7 alone", got)
	}
}

// A reader resuming, after a failover, from an index this master has in
// its log but has not applied yet gets nothing at or below that index when
// it is applied: it had it from the master before.
func TestResumeAheadOfThisMaster(t *testing.T) {
	b := New(100)
	b.Publish(3, []api.Event{ev(3, api.EventDriver, "d1")})
	s, _ := b.Subscribe(5, Filter{}, 100)
	b.Publish(5, []api.Event{ev(5, api.EventDriver, "d1")})
	b.Publish(6, []api.Event{ev(6, api.EventDriver, "d2")})
	got, err := s.Take()
	if err != nil || len(got) != 1 || got[0].Index != 6 {
		t.Fatalf("Take = %v, %v; want batch 6 alone", indexes(got), err)
	}
}

// A reader that falls behind is closed, and nothing else waits for it.
func TestSlowReaderIsClosed(t *testing.T) {
	b := New(100)
	slow, _ := b.Subscribe(0, Filter{}, 3)
	fast, _ := b.Subscribe(0, Filter{}, 100)
	for i := uint64(1); i <= 5; i++ {
		b.Publish(i, []api.Event{ev(i, api.EventDriver, "d")})
		if got, err := fast.Take(); err != nil || len(got) != 1 {
			t.Fatalf("fast reader at %d: %v, %v", i, indexes(got), err)
		}
	}
	if _, err := slow.Take(); !errors.Is(err, ErrTooSlow) || !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("slow reader: %v, want ErrTooSlow", err)
	}
	select {
	case <-slow.Ready():
	default:
		t.Fatal("a closed reader is not woken")
	}
}

// A restore drops what is held and closes every subscriber; Close ends
// one.
func TestResetAndClose(t *testing.T) {
	b := New(100)
	b.Publish(1, []api.Event{ev(1, api.EventDriver, "d")})
	s, _ := b.Subscribe(0, Filter{}, 100)
	b.Reset(10)
	if _, err := s.Take(); !errors.Is(err, ErrReset) {
		t.Fatalf("after Reset: %v", err)
	}
	if _, complete := b.Subscribe(5, Filter{}, 100); complete {
		t.Fatal("resuming from before the restore: complete")
	}
	s2, complete := b.Subscribe(10, Filter{}, 100)
	if !complete {
		t.Fatal("resuming from the restore: incomplete")
	}
	s2.Close()
	b.Publish(11, []api.Event{ev(11, api.EventDriver, "d")})
	if _, err := s2.Take(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
