package warnonce_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/drover-project/drover/internal/warnonce"
)

// lines is a log that keeps each record's message and attributes.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is the number of lines containing s.
func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// A key is logged once however often it comes, and again after Forget;
// keys up to the bound are each logged, and past it one line says so,
// once, while a forgotten key makes room for one more.
func TestWarnOncePerKeyUpToTheBound(t *testing.T) {
	const max = 8
	log := &lines{}
	s := warnonce.New(slog.New(slog.NewTextHandler(log, nil)), max, "more keys than are logged")
	warn := func(i int) { s.Warn(fmt.Sprint("k", i), "first", "key", fmt.Sprintf("<k%d>", i)) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { warn(0) })
	}
	wg.Wait()
	if n := log.count("<k0>"); n != 1 {
		t.Fatalf("k0 from 4 goroutines logged %d times, want 1", n)
	}
	s.Forget("k0")
	warn(0)
	if n := log.count("<k0>"); n != 2 {
		t.Fatalf("k0 after Forget logged %d times, want 2", n)
	}

	for i := 1; i < max; i++ {
		warn(i)
		warn(i)
	}
	if n, full := log.count("msg=first"), log.count("more keys"); n != max+1 || full != 0 {
		t.Fatalf("at the bound: %d warnings and %d overflow lines, want %d and 0", n, full, max+1)
	}
	warn(max)
	warn(max + 1)
	warn(3)
	if n, full := log.count("msg=first"), log.count(`msg="more keys than are logged" limit=8`); n != max+1 || full != 1 {
		t.Fatalf("past the bound: %d warnings and %d overflow lines, want %d and 1", n, full, max+1)
	}
	s.Forget("k1")
	warn(max + 2)
	warn(max + 3)
	if log.count("<k10>") != 1 || log.count("<k11>") != 0 || log.count("more keys") != 1 {
		t.Fatalf("after a Forget past the bound, logged %q, want k10 alone and no second overflow line", log.buf.String())
	}
}
