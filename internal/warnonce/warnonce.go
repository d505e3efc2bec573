// Package warnonce logs a warning the first time each key comes, in a set
// of keys bounded so that callers naming ever new keys (a scanner's
// addresses, made-up worker IDs or gossip names) can neither grow the set
// without end nor flood the log. Neither slog nor hashicorp's LRU caches
// do this: an LRU would forget old keys to make room, and each new key
// would be logged again.
package warnonce

import (
	"log/slog"
	"sync"
)

// Set logs warnings once per key. It holds at most max keys; past them
// it logs one line saying further keys go unlogged (once in its life,
// with the bound as "limit") and remembers no more, so a key dropped by
// Forget makes room for a new one. It is safe for concurrent use.
type Set struct {
	log  *slog.Logger
	max  int
	full string

	mu   sync.Mutex
	seen map[string]struct{}
	// overflowed is set once full was logged.
	overflowed bool
}

// New returns a Set that logs to log, holds up to max keys (max > 0)
// and, past them, logs full once.
func New(log *slog.Logger, max int, full string) *Set {
	return &Set{log: log, max: max, full: full, seen: map[string]struct{}{}}
}

// Warn logs msg with args at warning level when key is new and the set
// has room for it. The line is written outside the set's lock, so a slow
// log holds up no other caller's check.
func (s *Set) Warn(key, msg string, args ...any) {
	s.mu.Lock()
	_, seen := s.seen[key]
	room := len(s.seen) < s.max
	first := !seen && room
	if first {
		s.seen[key] = struct{}{}
	}
	overflow := !seen && !room && !s.overflowed
	if overflow {
		s.overflowed = true
	}
	s.mu.Unlock()
	switch {
	case first:
		s.log.Warn(msg, args...)
	case overflow:
		s.log.Warn(s.full, "limit", s.max)
	}
}

// Forget drops key, so that its next Warn logs again: for a condition
// that ended (a peer that got through).
func (s *Set) Forget(key string) {
	s.mu.Lock()
	delete(s.seen, key)
	s.mu.Unlock()
}
