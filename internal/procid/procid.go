// Package procid names one process for good on Linux: a PID and the start
// time the kernel gives it in /proc. A PID handed out again after its
// process ended comes with another start time, so the pair never names a
// stranger. The worker uses it to find its runners again after a restart,
// a runner to follow the worker daemon that holds its lease.
package procid

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
)

// Start returns the start time of process pid, field 22 of /proc/PID/stat
// (clock ticks after boot), and whether it is still running rather than a
// zombie: a process that is not its reader's child may be nobody's to reap,
// and a zombie has ended.
//
// It needs Linux's /proc; elsewhere every process looks gone (an error).
func Start(pid int) (start uint64, running bool, err error) {
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

// Alive reports whether the process pid that started at start (as Start
// tells) still runs. A zero pid or start names no process: false.
func Alive(pid int, start uint64) bool {
	if pid <= 0 || start == 0 {
		return false
	}
	s, running, err := Start(pid)
	return err == nil && running && s == start
}
