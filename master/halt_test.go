package master

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/fsm"
)

// A committed entry the master cannot decode stops it, naming the entry:
// it never skips it, and it hands leadership on as it stops.
func TestHaltsOnAnEntryItCannotApply(t *testing.T) {
	m, err := New(singleConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitReady(t, m)
	before := m.fsm.Index()
	// Type 0x7f is no command, and the high bit that would make it
	// ignorable is not set.
	f := m.raft.Apply([]byte{fsm.FormatJSON, 0x7f, '{', '}'}, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("the entry was not committed: %v", err)
	}
	select {
	case <-m.Halted():
	case <-time.After(10 * time.Second):
		t.Fatal("the master did not halt")
	}
	msg := m.Err().Error()
	if !strings.Contains(msg, "index "+strconv.FormatUint(f.Index(), 10)) || !strings.Contains(msg, "0x7f") {
		t.Fatalf("the halt says %q, want the index %d and the type byte", msg, f.Index())
	}
	if got := m.fsm.Index(); got != before {
		t.Fatalf("applied index %d after the halt, want %d (the entry before it)", got, before)
	}
}
