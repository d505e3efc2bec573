package events

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
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
	b := New(Bounds{Events: 4})
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
	b := New(Bounds{Events: 100})
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
	b := New(Bounds{Events: 100})
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
	b := New(Bounds{Events: 100})
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

// big returns an event of driver id whose program holds an environment of
// about n bytes.
func big(index uint64, id string, n int) api.Event {
	e := ev(index, api.EventDriver, id)
	e.Driver = &model.Driver{ID: id, DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Env: map[string]string{"DATA": strings.Repeat("x", n)}}}
	return e
}

// The buffer holds events up to its bound in bytes, by their Size: at
// the bound all are held; a byte past it, the oldest batch goes, and a
// reader resuming from before it is told it missed some. The latest batch
// stays, whatever its size.
func TestBufferBoundsBytes(t *testing.T) {
	e1, e2, e3 := big(1, "d1", 10000), big(2, "d2", 20000), big(3, "d3", 30000)
	for _, c := range []struct {
		bytes    int64
		complete bool
	}{
		{Size(e2) + Size(e3), true},
		{Size(e2) + Size(e3) - 1, false},
	} {
		b := New(Bounds{Events: 100, Bytes: c.bytes})
		b.Publish(1, []api.Event{e1})
		b.Publish(2, []api.Event{e2})
		b.Publish(3, []api.Event{e3})
		if _, complete := b.Subscribe(1, Filter{}, 100); complete != c.complete {
			t.Errorf("bound %d bytes, batches of %d and %d past index 1: resuming from 1 complete = %v, want %v",
				c.bytes, Size(e2), Size(e3), complete, c.complete)
		}
		if _, complete := b.Subscribe(2, Filter{}, 100); !complete {
			t.Errorf("bound %d bytes: the latest batch is not held", c.bytes)
		}
	}
	b := New(Bounds{Events: 100, Bytes: 1})
	b.Publish(4, []api.Event{big(4, "d4", 1<<20)})
	s, complete := b.Subscribe(3, Filter{}, 100)
	if got, _ := s.Take(); !complete || len(got) != 1 || got[0].Index != 4 {
		t.Fatalf("a batch larger than the bound: complete %v, replay %v; want batch 4", complete, indexes(got))
	}
}

// A reader whose unread events take more bytes than the buffer holds is
// closed as too slow, however few they are; up to the bound it is not.
func TestSlowReaderIsClosedPastTheBytes(t *testing.T) {
	e1, e2 := big(1, "d1", 10000), big(2, "d2", 10000)
	for _, c := range []struct {
		bytes int64
		slow  bool
	}{
		{Size(e1) + Size(e2), false},
		{Size(e1) + Size(e2) - 1, true},
	} {
		b := New(Bounds{Events: 100, Bytes: c.bytes})
		s, _ := b.Subscribe(0, Filter{}, 100)
		b.Publish(1, []api.Event{e1})
		b.Publish(2, []api.Event{e2})
		got, err := s.Take()
		if slow := errors.Is(err, ErrTooSlow); slow != c.slow {
			t.Errorf("bound %d bytes, %d unread: Take = %v, %v; want too slow %v", c.bytes, Size(e1)+Size(e2), indexes(got), err, c.slow)
		}
	}
}

// Size counts what an event's row holds that can grow: the environment,
// argv and artifacts of a program, an app's as a driver's, and a row's
// attempts and resources.
func TestSizeCountsWhatGrows(t *testing.T) {
	small, large := big(1, "d", 10), big(1, "d", 100000)
	if d := Size(large) - Size(small); d < 99990 {
		t.Errorf("100,000 more bytes of environment add %d bytes", d)
	}
	app := api.Event{Index: 1, Kind: api.EventApp, ID: "a", App: &model.App{ID: "a", ExecutorSpec: model.ExecutorSpec{Env: large.Driver.Env}}}
	if Size(app) < 100000 {
		t.Errorf("an app with a 100,000-byte environment: %d bytes", Size(app))
	}
	d := *small.Driver
	d.Attempts = make([]model.Attempt, 10)
	d.Artifacts = []model.Artifact{{URL: strings.Repeat("u", 5000)}}
	if got := Size(api.Event{Driver: &d}); got < Size(small)+5000+10*attemptBytes {
		t.Errorf("10 attempts and a 5,000-byte URL: %d bytes, %d without", got, Size(small))
	}
	w := api.Event{Worker: &model.Worker{ID: "w", Resources: model.Resources{"gpu": make([]string, 1000)}}}
	if Size(w) < 1000*entryBytes {
		t.Errorf("a worker offering 1,000 addresses: %d bytes", Size(w))
	}
	if del := Size(ev(1, api.EventDriver, "d")); del != eventBytes+1 {
		t.Errorf("a delete: %d bytes, want %d", del, eventBytes+1)
	}
}
