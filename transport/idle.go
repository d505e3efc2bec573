package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrStalled is the cause (context.Cause) of a context that Idle ended
// because its transfer made no progress.
var ErrStalled = errors.New("no progress")

// Idle returns a context that ends when ctx does, when cancel is called,
// or when d passes without a call of touch: the idle timeout of a transfer
// whose length no fixed deadline fits, such as an upload of hundreds of
// MiB. The ended context's cause wraps ErrStalled then. cancel must be
// called once the transfer is over.
func Idle(ctx context.Context, d time.Duration) (_ context.Context, touch func(), cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	t := time.AfterFunc(d, func() { cancelCause(fmt.Errorf("%w for %s", ErrStalled, d)) })
	return ctx, func() { t.Reset(d) }, func() {
		t.Stop()
		cancelCause(context.Canceled)
	}
}

// Touching returns r with touch called after each Read that returns bytes:
// the progress of a body that Idle watches.
func Touching(r io.Reader, touch func()) io.Reader { return &touching{r: r, touch: touch} }

type touching struct {
	r     io.Reader
	touch func()
}

func (t *touching) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}
