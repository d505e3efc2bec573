package model

import (
	"errors"
	"fmt"
	"slices"
)

// Bounded supervision. A supervised driver is restarted in place when its
// program exits non-zero (Spark's DriverRunner), for ever unless bounded:
// after more than MaxRestarts failed runs within RestartWindowMS it ends
// FAILED (YARN's maxAppAttempts with attemptFailuresValidityInterval, the
// Spark operator's onFailureRetries), and after RescheduleAfter failed runs
// in a row on one worker its next attempt goes to another worker when one
// has room (Nomad's restart block, then reschedule). The zero values keep
// Spark's behaviour: unbounded, in place.

// Limits of the bounds, so that the failed runs a driver's rows keep stay
// few.
const (
	// MaxRestartsLimit bounds MaxRestarts and RescheduleAfter.
	MaxRestartsLimit = 1000
	// MinRestartWindowMS is the shortest restart window, in milliseconds:
	// a run's end is stamped to the millisecond by a runner's clock, and a
	// shorter window would count nearly nothing.
	MinRestartWindowMS = 1000
)

// CheckSupervision checks a driver's restart bounds: each 0 (unbounded) or
// positive, MaxRestarts and RescheduleAfter at most MaxRestartsLimit, a
// window of at least MinRestartWindowMS and only with a MaxRestarts, and
// any bound only for a supervised driver. The error is one line and wraps
// no sentinel.
func CheckSupervision(supervise bool, maxRestarts int, windowMS int64, rescheduleAfter int) error {
	switch {
	case maxRestarts < 0 || maxRestarts > MaxRestartsLimit:
		return fmt.Errorf("max restarts must be from 1 to %d, got %d", MaxRestartsLimit, maxRestarts)
	case rescheduleAfter < 0 || rescheduleAfter > MaxRestartsLimit:
		return fmt.Errorf("reschedule after must be from 1 to %d failed runs, got %d", MaxRestartsLimit, rescheduleAfter)
	case windowMS < 0:
		return fmt.Errorf("restart window must be positive, got %d ms", windowMS)
	case windowMS > 0 && windowMS < MinRestartWindowMS:
		return fmt.Errorf("restart window must be at least 1s, got %d ms", windowMS)
	case windowMS > 0 && maxRestarts == 0:
		return errors.New("a restart window needs max restarts")
	case !supervise && (maxRestarts > 0 || rescheduleAfter > 0):
		return errors.New("max restarts and reschedule after need supervise")
	}
	return nil
}

// FailuresKept is how many of a driver's latest failed runs its rows keep
// and its runner counts: MaxRestarts+1 (one more failure than allowed ends
// it), or RescheduleAfter if that is more; 0 when unbounded, since then
// nothing counts them.
func FailuresKept(maxRestarts, rescheduleAfter int) int {
	n := rescheduleAfter
	if maxRestarts > 0 {
		n = max(n, maxRestarts+1)
	}
	return n
}

// KeepFailures returns the last n of failures (Unix ms, oldest first).
func KeepFailures(failures []int64, n int) []int64 {
	if len(failures) > n {
		failures = failures[len(failures)-n:]
	}
	return slices.Clone(failures)
}

// FailuresInWindow counts the failures (Unix ms) later than windowMS
// before now: the failed runs a restart bound counts. A window of 0 counts
// them all (YARN's attemptFailuresValidityInterval of -1).
func FailuresInWindow(failures []int64, now, windowMS int64) int {
	if windowMS == 0 {
		return len(failures)
	}
	n := 0
	for _, t := range failures {
		if t > now-windowMS {
			n++
		}
	}
	return n
}

// FailuresBefore returns the failed runs (Unix ms, oldest first) recorded
// in d's attempts numbered below attempt, the last FailuresKept of them:
// with d.Attempt, what a new runner of the current attempt starts
// counting from; with d.Attempt+1, all that the bounds count now.
func (d *Driver) FailuresBefore(attempt int) []int64 {
	var all []int64
	for _, a := range d.Attempts {
		if a.Attempt < attempt {
			all = append(all, a.Failures...)
		}
	}
	return KeepFailures(all, FailuresKept(d.MaxRestarts, d.RescheduleAfter))
}
