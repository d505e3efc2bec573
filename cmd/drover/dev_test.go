package main

import (
	"os"
	"path/filepath"
	"testing"
)

// drover dev refuses, before it makes anything, what would start a
// cluster whose workers die at start.
func TestDevRefusesWorkersThatCannotStart(t *testing.T) {
	for _, args := range [][]string{
		{"--worker-cores", "0"}, {"--worker-cores", "-2"}, {"--worker-memory", "0"}, {"--masters", "0"}, {"--workers", "-1"},
	} {
		dir := filepath.Join(t.TempDir(), "cluster")
		if code := runDev(append([]string{"--dir", dir}, args...)); code != 1 {
			t.Errorf("dev %v: exit %d, want 1", args, code)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("dev %v made %s", args, dir)
		}
	}
}
