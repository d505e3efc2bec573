// Package wait holds the one way Drover's loops pause: for a duration, or
// until their context ends.
package wait

import (
	"context"
	"time"
)

// Sleep waits d (not at all if d <= 0) and reports true, or false as soon
// as ctx ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
