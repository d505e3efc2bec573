package worker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// procStart returns the start time of process pid, field 22 of
// /proc/PID/stat (clock ticks after boot), and whether it is still running
// rather than a zombie. Together with the PID the start time names one
// process for good: a PID the kernel hands out again after the runner died
// comes with another start time. An adopted runner is not this worker's
// child, so nothing here reaps it; a zombie is an ended runner.
//
// It needs Linux's /proc; elsewhere every runner looks gone, so a restarted
// worker reports its attempts from their status files instead of adopting
// them.
func procStart(pid int) (start uint64, running bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself; the fields after its last ')' are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, false, errors.New("malformed /proc stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, err
	}
	return start, f[0] != "Z" && f[0] != "X", nil
}

// runnerAlive reports whether the process pid that started at start (as
// procStart tells) still runs.
func runnerAlive(pid int, start uint64) bool {
	if pid <= 0 || start == 0 {
		return false
	}
	s, running, err := procStart(pid)
	return err == nil && running && s == start
}

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
		if s, running, err := procStart(p); err == nil && running {
			return p, s
		}
	}
	return 0, 0
}
