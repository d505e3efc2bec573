package leader

import (
	"testing"
	"time"
)

// A worker missing from the pool is lost after the worker timeout of
// absence and silence; one the term has neither seen nor heard from only
// once newTermGrace more has passed since the term began, long enough for
// a live worker held at a frozen previous leader to find this one.
func TestMissingTooLongWaitsForWorkersHeldElsewhere(t *testing.T) {
	const timeout = time.Second
	start := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	cases := []struct {
		name                string
		now, since, contact time.Duration
		known               bool
		want                bool
	}{
		{"seen this term, gone and silent for the timeout", 4 * time.Second, 3 * time.Second, 3 * time.Second, true, true},
		{"seen this term, gone just short of the timeout", 3900 * time.Millisecond, 3 * time.Second, 3 * time.Second, true, false},
		{"a recent heartbeat speaks for it", 10 * time.Second, 0, 9500 * time.Millisecond, true, false},
		{"unknown, one timeout into the term", timeout, 0, 0, false, false},
		{"unknown, just short of the grace", timeout + newTermGrace - time.Millisecond, 0, 0, false, false},
		{"unknown, past the grace", timeout + newTermGrace, 0, 0, false, true},
	}
	for _, c := range cases {
		if got := missingTooLong(at(c.now), start, at(c.since), at(c.contact), c.known, timeout); got != c.want {
			t.Errorf("%s: missingTooLong = %v, want %v", c.name, got, c.want)
		}
	}
	if newTermGrace < 3*time.Second {
		t.Errorf("newTermGrace %s is shorter than a worker's hedge after a frozen leader", newTermGrace)
	}
}
