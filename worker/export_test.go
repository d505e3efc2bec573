package worker

import "context"

// CleanNow runs one work-dir cleanup pass, as the worker does every
// cleanupInterval, and returns when it is done.
func CleanNow(w *Worker) { w.clean(context.Background()) }
