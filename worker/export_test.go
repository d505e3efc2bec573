package worker

import (
	"context"
	"time"
)

// CleanNow runs one work-dir cleanup pass, as the worker does every
// cleanupInterval, and returns when it is done.
func CleanNow(w *Worker) { w.janitor.clean(context.Background()) }

// ActedOnSince says whether w has acted on the answer to a heartbeat it sent
// after since: applied its acknowledgements and reconciled its units.
func ActedOnSince(w *Worker, since time.Time) bool {
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	return w.st.leaseContact.After(since)
}
