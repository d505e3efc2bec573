package worker

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-project/drover/internal/procid"
)

// findRunner looks for a running "runner --dir DIR" process, for a record
// written before its runner was started: a worker that died between the
// start and the record's update left no PID. It scans /proc once; 0 means
// none was found.
func findRunner(dir string) (pid int, start uint64) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	want := []string{runnerSubcommand, "--dir", filepath.Clean(dir)}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) != 1+len(want) || !slices.Equal(args[1:], want) {
			continue
		}
		if s, running, err := procid.Start(p); err == nil && running {
			return p, s
		}
	}
	return 0, 0
}
