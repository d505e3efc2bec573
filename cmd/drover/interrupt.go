package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// interrupted is the cause of a command's context when SIGINT (Ctrl-C)
// or SIGTERM ended it. signal.NotifyContext's cause names the signal in
// prose only, and the exit code needs its number, hence this small type.
type interrupted struct{ sig syscall.Signal }

// Error names the signal: "interrupted (SIGINT)".
func (i interrupted) Error() string { return fmt.Sprintf("interrupted (%s)", unix.SignalName(i.sig)) }

// Is makes an interruption a context.Canceled, as a plain cancel is.
func (i interrupted) Is(target error) bool { return target == context.Canceled }

// exitCode is 128 plus the signal's number, what a shell reports of a
// process the signal ended: 130 for SIGINT, 143 for SIGTERM. A script
// tells it from the driver's own outcome (0, 1) and from the client's
// (2, 3, 4).
func (i interrupted) exitCode() int { return 128 + int(i.sig) }

// Exit codes of an interrupted command (interrupted.exitCode), named for
// the usages and tests.
const (
	exitSIGINT  = 128 + int(syscall.SIGINT)
	exitSIGTERM = 128 + int(syscall.SIGTERM)
)

// interruptContext returns a context that SIGINT or SIGTERM cancels with
// an interrupted cause, and the function that stops catching them.
func interruptContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(interrupted{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// interruption returns the signal that ended ctx, if one did.
func interruption(ctx context.Context) (interrupted, bool) {
	var i interrupted
	ok := errors.As(context.Cause(ctx), &i)
	return i, ok
}
