package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
)

// lineWatcher is a writer that tells, once, when what was written holds
// a string.
type lineWatcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newLineWatcher(want string) *lineWatcher {
	return &lineWatcher{want: want, seen: make(chan struct{})}
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Ctrl-C during submit --wait, or during watch of one driver, leaves the
// driver running: the client says so, with how to follow it or kill it,
// and exits 130 (the shell's code for SIGINT), not 1, which means the
// driver FAILED. The signal is a real one, sent to this process once the
// command catches it.
func TestInterruptLeavesTheDriverAndExits130(t *testing.T) {
	const id = "driver-20260101000000-0100"
	for _, tc := range []struct {
		name string
		args []string
		// ready is what the command prints, on stdout or stderr, once
		// it waits on the driver.
		ready string
	}{
		{"submit --wait", []string{"submit", "--wait", "--", "/bin/sleep", "600"}, id + " SUBMITTED"},
		{"watch", []string{"watch", id}, id + "\tSUBMITTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeMaster(t, &model.Driver{ID: id, State: model.DriverSubmitted, Attempt: 1})
			f.holdEvents = true
			f.placed = func(id string) *model.Driver { return &model.Driver{ID: id, State: model.DriverSubmitted, Attempt: 1} }
			stdout, stderr := newLineWatcher(tc.ready), newLineWatcher(tc.ready)
			code := make(chan int, 1)
			go func() { code <- runClient(append([]string{"--masters", f.addr()}, tc.args...), stdout, stderr) }()
			select {
			case <-stdout.seen:
			case <-stderr.seen:
			case c := <-code:
				t.Fatalf("exit %d before the interruption, stderr %q", c, stderr)
			case <-time.After(10 * time.Second):
				t.Fatalf("no %q within 10s, stdout %q, stderr %q", tc.ready, stdout, stderr)
			}
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			var c int
			select {
			case c = <-code:
			case <-time.After(10 * time.Second):
				t.Fatal("still running 10s after SIGINT")
			}
			want := fmt.Sprintf("drover: interrupted (SIGINT): %s is still SUBMITTED and was not killed: drover client status %[1]s or drover client watch %[1]s follows it, drover client kill %[1]s kills it\n", id)
			if c != exitSIGINT || !strings.HasSuffix(stderr.String(), want) {
				t.Fatalf("exit %d, stderr %q; want %d and it to end %q", c, stderr, exitSIGINT, want)
			}
		})
	}
}
