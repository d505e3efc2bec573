package runner_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

// seqOutput is what seq 1 n prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// logFiles returns the sizes of stream's log files in dir by their
// starting offsets, sorted.
func logFiles(t testing.TB, dir, stream string) (starts []int64, sizes map[int64]int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sizes = map[int64]int64{}
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), stream+".")
		if !ok {
			continue
		}
		start, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || unitdir.LogFileName(stream, start) != e.Name() {
			t.Fatalf("log file %q is not named by its offset", e.Name())
		}
		info, err := e.Info()
		if err != nil {
			continue // rotated away meanwhile
		}
		starts = append(starts, start)
		sizes[start] = info.Size()
	}
	slices.Sort(starts)
	return starts, sizes
}

// A program writing more than 50 MiB as fast as it can, under a bound of
// 3 files of 4 MiB: at no time do the files hold more than the bound, and
// once the runner reports the end they hold the newest bytes, all of them,
// in order, in files named by their offsets.
func TestRotationKeepsTheNewestBytesWithinTheBound(t *testing.T) {
	const (
		maxSize  = 4 << 20
		maxFiles = 3
		lines    = 6_820_000
	)
	want := seqOutput(lines)
	if len(want) < 50<<20 {
		t.Fatalf("the program writes %d bytes, want at least 50 MiB", len(want))
	}
	h := startRunner(t, unitdir.Spec{
		Argv:           []string{"seq", "1", strconv.Itoa(lines)},
		Env:            []string{"PATH=/usr/bin:/bin"},
		LogMaxFileSize: maxSize,
		LogMaxFiles:    maxFiles,
	})
	h.next(unitdir.EventStarted)
	// Watch the bound while the program writes, until it has exited.
	exited := make(chan unitdir.Event, 1)
	go func() { exited <- h.next(unitdir.EventExited) }()
	samples := 0
	for watching := true; watching; samples++ {
		select {
		case <-exited:
			watching = false
		default:
		}
		starts, sizes := logFiles(t, h.dir, unitdir.StdoutFile)
		var total int64
		for i, s := range starts {
			if sizes[s] > maxSize {
				t.Fatalf("file at %d holds %d bytes, above the %d bound", s, sizes[s], maxSize)
			}
			// One file more than the bound is the oldest, which the
			// rotation deletes right after it opens the newest; the
			// listing and the sizes are not one instant, so the newest
			// may have grown meanwhile.
			if i > 0 || len(starts) <= maxFiles {
				total += sizes[s]
			}
		}
		if total > maxSize*maxFiles || len(starts) > maxFiles+1 {
			t.Fatalf("%d files hold %d bytes, above %d files of %d", len(starts), total, maxFiles, maxSize)
		}
	}
	if e := h.final(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}

	starts, sizes := logFiles(t, h.dir, unitdir.StdoutFile)
	if len(starts) != maxFiles {
		t.Fatalf("%d files kept, want %d", len(starts), maxFiles)
	}
	for i, s := range starts {
		if s%maxSize != 0 || (i < len(starts)-1 && sizes[s] != maxSize) {
			t.Fatalf("files %v with sizes %v: each but the newest must be full and start at a multiple of the bound", starts, sizes)
		}
	}
	got := readStream(t, h.dir, unitdir.StdoutFile, 0)
	if kept := want[starts[0]:]; got != string(kept) {
		t.Fatalf("the kept %d bytes are not the program's last %d bytes in order", len(got), len(kept))
	}
	if min := int64(maxFiles-1) * maxSize; int64(len(got)) <= min {
		t.Fatalf("kept %d bytes, want more than %d", len(got), min)
	}
	t.Logf("%d bytes written, %d kept from offset %d, bound checked %d times during the run", len(want), len(got), starts[0], samples)
}

// A reader addresses the stream by logical offset across files: a range
// may span several, one asked from a rotated offset starts where the
// stream now does, one past the end is empty, and the size counts the
// rotated bytes.
func TestOpenLogAcrossRotation(t *testing.T) {
	h := startRunner(t, unitdir.Spec{
		// 26 lines of 10 bytes: "a........\n" to "z........\n".
		Argv:           []string{"/bin/sh", "-c", `for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do echo "$c........"; done`},
		LogMaxFileSize: 64,
		LogMaxFiles:    2,
	})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}
	var all strings.Builder
	for c := 'a'; c <= 'z'; c++ {
		fmt.Fprintf(&all, "%c........\n", c)
	}
	full := all.String() // 260 bytes; files of 64 keep 192..260
	root, err := os.OpenRoot(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		offset, start int64
	}{
		{0, 192}, {191, 192}, {192, 192}, {200, 200}, {255, 255}, {259, 259}, {260, 260}, {1000, 1000},
	} {
		l, err := unitdir.OpenLog(root, unitdir.StdoutFile, c.offset)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(l)
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		if l.Start != c.start || l.Size != 260 || l.End != max(260, c.start) || string(b) != full[min(c.start, 260):] {
			t.Fatalf("offset %d: start %d end %d size %d %q; want start %d size 260 and %q",
				c.offset, l.Start, l.End, l.Size, b, c.start, full[min(c.start, 260):])
		}
	}
	// Both files are read in one range.
	if got := readStream(t, h.dir, unitdir.StdoutFile, 250); got != full[250:] {
		t.Fatalf("from 250: %q", got)
	}
}

func TestOpenLogOfNothingYetIsEmpty(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, err := unitdir.OpenLog(root, unitdir.StderrFile, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if b, _ := io.ReadAll(l); len(b) != 0 || l.Size != 0 || l.Start != 7 || l.End != 7 {
		t.Fatalf("empty log: %q start %d end %d size %d", b, l.Start, l.End, l.Size)
	}
	if _, err := unitdir.OpenLog(root, unitdir.StderrFile, -1); err == nil {
		t.Fatal("a negative offset was taken")
	}
}

// A unit directory written before rotation holds one file per stream,
// which reads as the stream from offset 0.
func TestOpenLogReadsASingleFileOfOldRunners(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, unitdir.StdoutFile), []byte("old runner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readStream(t, dir, unitdir.StdoutFile, 4); got != "runner\n" {
		t.Fatalf("got %q", got)
	}
}

// Bytes a crashed machine lost inside the kept files end a range at the
// gap, and a read from inside the gap goes on after it: offsets stay those
// of the names.
func TestOpenLogSkipsAGap(t *testing.T) {
	dir := t.TempDir()
	for start, data := range map[int64]string{0: "0123", 8: "89ab"} {
		if err := os.WriteFile(filepath.Join(dir, unitdir.LogFileName(unitdir.StdoutFile, start)), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		offset, start, end int64
		data               string
	}{{0, 0, 4, "0123"}, {2, 2, 4, "23"}, {4, 8, 12, "89ab"}, {9, 9, 12, "9ab"}} {
		l, err := unitdir.OpenLog(root, unitdir.StdoutFile, c.offset)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(l)
		l.Close()
		if l.Start != c.start || l.End != c.end || l.Size != 12 || string(b) != c.data {
			t.Fatalf("offset %d: start %d end %d size %d %q, want %d %d 12 %q", c.offset, l.Start, l.End, l.Size, b, c.start, c.end, c.data)
		}
	}
}

// A program may swap its log for a link to a file it must not show.
func TestOpenLogRefusesALink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, unitdir.LogFileName(unitdir.StdoutFile, 0))); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if l, err := unitdir.OpenLog(root, unitdir.StdoutFile, 0); err == nil {
		b, _ := io.ReadAll(l)
		l.Close()
		t.Fatalf("read %q through a link", b)
	}
}

// A process that leaves the program's group keeps its output pipe open;
// the runner ends the run anyway, within its drain bound, with what the
// program wrote.
func TestEscapedProcessDoesNotHoldTheRunOpen(t *testing.T) {
	h := startRunner(t, unitdir.Spec{
		// The escaped shell writes its PID once it is in a session of its
		// own, which the program waits for.
		Argv: []string{"/bin/sh", "-c", `setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 1000' &
while [ ! -e escaped ]; do sleep 0.01; done; echo done`},
		Env: []string{"PATH=/usr/bin:/bin"},
	})
	started := h.next(unitdir.EventStarted)
	pid, err := strconv.Atoi(h.waitFile("escaped"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	exited := h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished {
		t.Fatalf("final = %+v", e)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the escaped process is gone (%v): the test tests nothing", err)
	}
	t.Logf("the run ended %v after the program", exited.Time.Sub(started.Time))
	if got := h.stream(unitdir.StdoutFile); got != "done\n" {
		t.Fatalf("stdout = %q", got)
	}
}

// BenchmarkOutput50MiB measures how fast a program (dd, 64 KiB writes)
// writes 50 MiB to its stdout: straight into a file (no runner), and under
// a runner with rotation off (one file larger than the output) and on (the
// default 10 MiB x 5 files, so four rotations). It reports the program's
// own throughput as dd measures it (program-MB/s; MB/s and ns/op include
// starting the runner) and the runner's peak resident memory.
func BenchmarkOutput50MiB(b *testing.B) {
	const size = 50 << 20
	program := []string{"dd", "if=/dev/zero", "bs=64k", "count=" + strconv.Itoa(size/(64<<10))}
	b.Run("no-runner", func(b *testing.B) {
		b.SetBytes(size)
		var took time.Duration
		for b.Loop() {
			dir := b.TempDir()
			f, err := os.Create(filepath.Join(dir, "stdout"))
			if err != nil {
				b.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(program[0], program[1:]...)
			cmd.Stdout, cmd.Stderr = f, &stderr
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			f.Close()
			took += ddTime(b, stderr.String())
		}
		b.ReportMetric(float64(size)*float64(b.N)/took.Seconds()/1e6, "program-MB/s")
	})
	for _, c := range []struct {
		name             string
		maxSize          int64
		maxFiles, rotate int
	}{{"rotation-off", 1 << 30, 1, 0}, {"rotation-on", unitdir.DefaultLogMaxFileSize, unitdir.DefaultLogMaxFiles, 4}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			self, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			var rss int64
			var took time.Duration
			for b.Loop() {
				dir := b.TempDir()
				if err := unitdir.WriteSpec(dir, unitdir.Spec{Argv: program, Env: []string{"PATH=/usr/bin:/bin"},
					LogMaxFileSize: c.maxSize, LogMaxFiles: c.maxFiles}); err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command(self, "runner", "--dir", dir)
				if out, err := cmd.Output(); err != nil || !bytes.Contains(out, []byte(`"state":"FINISHED"`)) {
					b.Fatalf("runner: %v\n%s", err, out)
				}
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					rss = max(rss, ru.Maxrss)
				}
				b.StopTimer()
				took += ddTime(b, readStream(b, dir, unitdir.StderrFile, 0))
				starts, _ := logFiles(b, dir, unitdir.StdoutFile)
				if want := min(c.rotate+1, c.maxFiles); len(starts) != want {
					b.Fatalf("%d stdout files, want %d", len(starts), want)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(size)*float64(b.N)/took.Seconds()/1e6, "program-MB/s")
			b.ReportMetric(float64(rss)/1024, "runner-peak-RSS-MiB")
		})
	}
}

// ddTime is the time dd reports on its stderr ("... copied, 0.0264 s, ...").
func ddTime(tb testing.TB, stderr string) time.Duration {
	tb.Helper()
	for _, part := range strings.Split(stderr, ", ") {
		if secs, ok := strings.CutSuffix(part, " s"); ok {
			if f, err := strconv.ParseFloat(secs, 64); err == nil {
				return time.Duration(f * float64(time.Second))
			}
		}
	}
	tb.Fatalf("no time in dd's report %q", stderr)
	return 0
}
