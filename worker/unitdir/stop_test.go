package unitdir_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-project/drover/worker/unitdir"
)

// A preemption's stop file carries its grace, which StopGrace reads back
// (0 for a deadline already passed), and still reads as a kill on request
// to StopRequested, as runners of earlier versions read it; a plain kill,
// a fence, a missing file or a damaged grace carry none.
func TestStopGrace(t *testing.T) {
	dir := t.TempDir()
	if _, ok := unitdir.StopGrace(dir); ok {
		t.Fatal("a grace without a stop file")
	}
	for _, g := range []time.Duration{1500 * time.Millisecond, -time.Second} {
		if err := unitdir.RequestPreemption(dir, g); err != nil {
			t.Fatal(err)
		}
		if got, ok := unitdir.StopGrace(dir); !ok || got != max(g, 0) {
			t.Fatalf("grace %s read back as %s, %v", g, got, ok)
		}
		if reason, ok := unitdir.StopRequested(dir); !ok || reason != unitdir.ReasonKilled {
			t.Fatalf("a preemption reads as %q, %v; want a kill on request", reason, ok)
		}
	}
	for _, fenced := range []bool{false, true} {
		if err := unitdir.RequestStop(dir, fenced); err != nil {
			t.Fatal(err)
		}
		if _, ok := unitdir.StopGrace(dir); ok {
			t.Fatalf("a stop (fenced %v) carries a grace", fenced)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, unitdir.StopFile), []byte(unitdir.ReasonKilled+"\ngrace-ms -5"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := unitdir.StopGrace(dir); ok {
		t.Fatal("a negative grace was read")
	}
}
