package unitdir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ReasonKilled is the reason of a KILLED final state when the runner got
// SIGTERM or SIGINT. The others are ReasonFenced, LeaseExpiredReason and
// DaemonGoneReason.
const ReasonKilled = "killed on request"

// ReasonFenced is the reason of the KILLED final state of an attempt its
// worker fenced (SIGUSR2): under strict fencing it lost contact with every
// leader for the lease.
const ReasonFenced = "fenced: no contact with a leader for the lease"

// StopFile, in the attempt directory, says that the worker asked the
// runner to stop: it holds ReasonFenced or ReasonKilled.
const StopFile = "stop"

// RequestStop records that the attempt in dir must stop, fenced or killed
// on request, before the worker signals its runner. A signal can reach the
// runner before it listens: Go drops a SIGUSR2 nobody listens for, and a
// worker frozen between its checks and a launch (SIGSTOP) resumes to fence
// a runner it has just started. The runner reads the file once it listens,
// and again before every launch, so such a stop is never lost and the
// program never starts after it.
func RequestStop(dir string, fenced bool) error {
	reason := ReasonKilled
	if fenced {
		reason = ReasonFenced
	}
	return writeFileAtomic(dir, StopFile, []byte(reason), private)
}

// StopRequested returns the reason in dir's StopFile, if there is one:
// the runner reads it once it listens for signals and before every launch.
func StopRequested(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, StopFile))
	if err != nil {
		return "", false
	}
	if string(b) == ReasonFenced {
		return ReasonFenced, true
	}
	return ReasonKilled, true
}

// gracePrefix starts the second line of a stop file that
// RequestPreemption wrote: the grace in milliseconds follows it.
const gracePrefix = "\ngrace-ms "

// RequestPreemption records that the attempt in dir must stop, as
// RequestStop does for a kill on request, with grace between SIGTERM and
// SIGKILL in place of the spec's KillTimeout: the masters'
// --preemption-grace, what is left of it when the notice arrives. The
// first line stays ReasonKilled, which runners of earlier versions read
// as a kill on request.
func RequestPreemption(dir string, grace time.Duration) error {
	return writeFileAtomic(dir, StopFile, []byte(ReasonKilled+gracePrefix+strconv.FormatInt(max(grace, 0).Milliseconds(), 10)), private)
}

// StopGrace returns the grace a RequestPreemption put in dir's StopFile,
// or false when there is none (a plain kill, a fence, no stop at all).
func StopGrace(dir string) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join(dir, StopFile))
	if err != nil {
		return 0, false
	}
	_, ms, ok := strings.Cut(string(b), gracePrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}
