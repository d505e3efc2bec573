package main

import (
	"testing"
	"time"
)

// A node that keeps dying soon after each restart waits twice as long each
// time, up to the cap; one that ran long enough starts over from the base;
// a base above the cap is never shortened.
func TestRestartPauseBacksOff(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		base, prev, ran, want time.Duration
	}{
		{10 * s, 0, s, 10 * s},
		{10 * s, 10 * s, s, 20 * s},
		{10 * s, 20 * s, 0, 40 * s},
		{10 * s, 40 * s, s, time.Minute},
		{10 * s, time.Minute, s, time.Minute},
		{10 * s, time.Minute, restartStable, 10 * s},
		{2 * time.Minute, 2 * time.Minute, s, 2 * time.Minute},
	} {
		if got := restartPause(c.base, c.prev, c.ran); got != c.want {
			t.Errorf("restartPause(%s, %s, %s) = %s, want %s", c.base, c.prev, c.ran, got, c.want)
		}
	}
}
