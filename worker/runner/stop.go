package runner

import (
	"os"
	"path/filepath"
)

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

// stopRequested returns the reason in dir's StopFile, if there is one.
func stopRequested(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, StopFile))
	if err != nil {
		return "", false
	}
	if string(b) == ReasonFenced {
		return ReasonFenced, true
	}
	return ReasonKilled, true
}
