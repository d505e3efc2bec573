// Package probe is the suite's test driver (run as jepsen/cmd/probe) and
// what reads its traces. A probe records, per run of a driver attempt,
// when it started, a heartbeat every 100 ms, and how it ended, in its own
// file; the checkers use these to see which attempts were alive when. A
// sampler of /proc gives a second, independent view of which probe
// processes were alive.
package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Heartbeat is how often a probe records that it is alive.
const Heartbeat = 100 * time.Millisecond

// Spec is what a probe is told on its command line.
type Spec struct {
	// Dir is where it writes DIR/DRIVER_ID/ATTEMPT.PID.
	Dir string
	// Run is how long it runs before exiting.
	Run time.Duration
	// FailFirst makes the first FailFirst runs of the driver (over all
	// attempts) exit 1 instead of 0.
	FailFirst int
}

// Args returns the command-line arguments for spec, after the program
// (jepsen/cmd/probe).
func (s Spec) Args() []string {
	return []string{"--dir", s.Dir, "--run", s.Run.String(), "--fail-first", strconv.Itoa(s.FailFirst)}
}

// Main runs a probe with the given arguments (those of Args) and returns
// its exit code. It reads DROVER_DRIVER_ID, DROVER_ATTEMPT and
// DROVER_WORKER_ID from the environment. SIGTERM ends it at once with 143,
// recorded.
func Main(args []string) int {
	spec, err := parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 2
	}
	driver, attempt, worker := os.Getenv("DROVER_DRIVER_ID"), os.Getenv("DROVER_ATTEMPT"), os.Getenv("DROVER_WORKER_ID")
	if driver == "" || strings.ContainsAny(driver, "/.") {
		fmt.Fprintln(os.Stderr, "probe: DROVER_DRIVER_ID is missing or not a plain name")
		return 2
	}
	dir := filepath.Join(spec.Dir, driver)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 2
	}
	earlier, _ := os.ReadDir(dir)
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s.%d", attempt, os.Getpid())), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 2
	}
	defer f.Close()
	note := func(format string, a ...any) {
		// One write per line, so a kill never leaves half a line.
		_, _ = f.WriteString(fmt.Sprintf(format, a...) + "\n")
	}
	note("start %d %s", time.Now().UnixNano(), worker)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(Heartbeat)
	defer tick.Stop()
	end := time.After(spec.Run)
	for {
		select {
		case <-tick.C:
			note("hb %d", time.Now().UnixNano())
		case <-term:
			note("exit 143 %d", time.Now().UnixNano())
			return 143
		case <-end:
			code := 0
			if len(earlier) < spec.FailFirst {
				code = 1
			}
			note("exit %d %d", code, time.Now().UnixNano())
			return code
		}
	}
}

func parse(args []string) (Spec, error) {
	var s Spec
	for i := 0; i+1 < len(args); i += 2 {
		var err error
		switch args[i] {
		case "--dir":
			s.Dir = args[i+1]
		case "--run":
			s.Run, err = time.ParseDuration(args[i+1])
		case "--fail-first":
			s.FailFirst, err = strconv.Atoi(args[i+1])
		default:
			err = fmt.Errorf("unknown flag %s", args[i])
		}
		if err != nil {
			return s, err
		}
	}
	if len(args)%2 != 0 || s.Dir == "" || s.Run <= 0 {
		return s, errors.New("usage: probe --dir DIR --run DURATION [--fail-first N]")
	}
	return s, nil
}

// Run is one run of one attempt of a driver, as its probe recorded it.
// Times are Unix nanoseconds; End is 0 and Exit nil if it never recorded
// an exit (killed with SIGKILL, or still running).
type Run struct {
	Driver   string
	Attempt  int
	PID      int
	Worker   string
	Start    int64
	LastBeat int64
	End      int64
	Exit     *int
}

// Alive is the last instant the run is known to have been alive.
func (r Run) Alive() int64 { return max(r.Start, r.LastBeat, r.End) }

// ReadRuns reads every probe file under dir.
func ReadRuns(dir string) ([]Run, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.*"))
	if err != nil {
		return nil, err
	}
	var out []Run
	for _, path := range files {
		r, err := readRun(path)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func readRun(path string) (Run, error) {
	var r Run
	r.Driver = filepath.Base(filepath.Dir(path))
	attempt, pid, _ := strings.Cut(filepath.Base(path), ".")
	var err1, err2 error
	r.Attempt, err1 = strconv.Atoi(attempt)
	r.PID, err2 = strconv.Atoi(pid)
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("probe file %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return r, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue // a line cut short by the end of the run
		}
		switch {
		case fs[0] == "start" && len(fs) >= 2:
			r.Start, _ = strconv.ParseInt(fs[1], 10, 64)
			if len(fs) > 2 {
				r.Worker = fs[2]
			}
		case fs[0] == "hb":
			r.LastBeat, _ = strconv.ParseInt(fs[1], 10, 64)
		case fs[0] == "exit" && len(fs) == 3:
			code, _ := strconv.Atoi(fs[1])
			r.Exit = &code
			r.End, _ = strconv.ParseInt(fs[2], 10, 64)
		}
	}
	return r, sc.Err()
}

// Sighting is a probe process the sampler saw alive, from First to Last
// (Unix nanoseconds), with the driver, attempt and worker its environment
// named. Worker is known even when the probe never wrote its trace (it
// was killed while it started), so that a fault on that worker counts
// for it.
type Sighting struct {
	Driver  string
	Attempt int
	Worker  string
	PID     int
	First   int64
	Last    int64
}

// Sample scans /proc every interval until ctx ends, for processes running
// program, and returns what it saw. A process is one PID and start time:
// a PID the kernel gives again to a later probe makes a sighting of its
// own.
func Sample(ctx context.Context, program string, interval time.Duration) []Sighting {
	s := sampler{program: program, seen: map[process]*Sighting{}}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.scan(time.Now().UnixNano())
		select {
		case <-ctx.Done():
			return s.sightings()
		case <-tick.C:
		}
	}
}

// process is one process: its PID and /proc/PID/stat's starttime (clock
// ticks since boot).
type process struct {
	pid   int
	start string
}

// sampler is what Sample has seen so far, in the order it first saw it.
type sampler struct {
	program string
	seen    map[process]*Sighting
	order   []process
}

// scan reads /proc once, at now (Unix ns).
func (s *sampler) scan(now int64) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		start, ok := liveProbe(p, s.program)
		if !ok {
			continue
		}
		k := process{pid, start}
		if seen, ok := s.seen[k]; ok {
			seen.Last = now
			continue
		}
		sg, ok := probeEnv(p)
		if !ok {
			continue
		}
		sg.PID, sg.First, sg.Last = pid, now, now
		s.seen[k] = &sg
		s.order = append(s.order, k)
	}
}

func (s *sampler) sightings() []Sighting {
	out := make([]Sighting, len(s.order))
	for i, k := range s.order {
		out[i] = *s.seen[k]
	}
	return out
}

// liveProbe says whether the process at p runs program and has not
// exited (a zombie, exited and not yet reaped, is not alive), and gives
// its start time.
func liveProbe(p, program string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(p, "cmdline"))
	if err != nil {
		return "", false
	}
	if args := strings.Split(string(b), "\x00"); args[0] != program {
		return "", false
	}
	st, err := os.ReadFile(filepath.Join(p, "stat"))
	if err != nil {
		return "", false
	}
	// After the command name in parentheses: state, then starttime as the
	// 20th field.
	i := strings.LastIndexByte(string(st), ')')
	if i < 0 {
		return "", false
	}
	fs := strings.Fields(string(st[i+1:]))
	if len(fs) < 20 || fs[0] == "Z" {
		return "", false
	}
	return fs[19], true
}

// probeEnv reads the driver, attempt and worker from the environment of
// the process at p; ok is false when it names no driver.
func probeEnv(p string) (Sighting, bool) {
	var s Sighting
	env, err := os.ReadFile(filepath.Join(p, "environ"))
	if err != nil {
		return s, false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "DROVER_DRIVER_ID":
			s.Driver = v
		case "DROVER_ATTEMPT":
			s.Attempt, _ = strconv.Atoi(v)
		case "DROVER_WORKER_ID":
			s.Worker = v
		}
	}
	return s, s.Driver != ""
}
