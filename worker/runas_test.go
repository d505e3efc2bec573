package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-project/drover/runner"
	"github.com/drover-project/drover/worker"
)

// A token a runner could not take (longer than runner.MaxCredential) is
// refused at start, in one line, before the work dir is made; one at the
// bound is taken.
func TestWorkerRefusesATokenLongerThanARunnerTakes(t *testing.T) {
	fm := newFakeMaster(t)
	newWorker(t, fm, func(c *worker.Config) { c.NodeToken = strings.Repeat("t", runner.MaxCredential) })
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Masters, cfg.WorkDir, cfg.Cores, cfg.MemoryMB = "w1", []string{fm.addr()}, filepath.Join(t.TempDir(), "work"), 1, 1
	cfg.NodeToken = strings.Repeat("t", runner.MaxCredential+1)
	_, err := worker.New(cfg)
	if want := "the node token is 4097 bytes, more than the 4096 a runner takes"; err == nil || err.Error() != want {
		t.Fatalf("New: %v, want %q", err, want)
	}
	if _, err := os.Stat(cfg.WorkDir); !os.IsNotExist(err) {
		t.Fatalf("the refused worker made its work dir (%v)", err)
	}
}
