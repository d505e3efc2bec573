package api

import "time"

// DefaultHedgeAfter and DefaultMaxRetryInterval are the client's
// Options.HedgeAfter and Options.MaxRetryInterval when unset (package
// client). Together they bound how long a worker's sticky heartbeat, held
// at a leader that froze, takes to reach the next one, so the leader's
// liveness watch (package master/leader) waits that long at the start of a
// term: both read them here.
const (
	DefaultHedgeAfter       = 3 * time.Second
	DefaultMaxRetryInterval = time.Second
)
