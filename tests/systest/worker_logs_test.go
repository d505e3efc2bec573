package systest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/worker/unitdir"
)

// paddedLines is what the shell loop of TestLogsFollowAcrossRotation
// prints: n numbered lines of 103 bytes.
func paddedLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %05d %s\n", i, strings.Repeat("x", 90))
	}
	return b.String()
}

// firstKept is the offset of the oldest byte of stream kept in the unit
// directory dir, from the names of its log files.
func firstKept(t *testing.T, dir, stream string) int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, stream+".*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no %s files in %s (%v)", stream, dir, err)
	}
	slices.Sort(names)
	start, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(names[0]), stream+"."), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return start
}

// A driver writes 500 KiB in five seconds on a worker that keeps 5 files
// of 64 KiB: `logs --follow` prints every byte in order as the files
// rotate under it, while a plain `logs` afterwards prints what is still
// kept and says on stderr what was rotated away. A follower's API, asked
// through the leader or on its own (stale), says where the stream now
// starts.
func TestLogsFollowAcrossRotation(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerArgs: []string{"--log-max-size", "64k", "--log-max-files", "5"}})
	const lines = 5000
	want := paddedLines(lines)
	loop := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf 'line %%05d %%s\n' $i %s; i=$((i+1)); if [ $((i %% 100)) = 0 ]; then sleep 0.1; fi; done`,
		lines, strings.Repeat("x", 90))
	id := submit(t, c, api.SubmitRequest{Token: "follow-rotation-0123456789", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", loop}, Cores: 1, MemoryMB: 64}})
	env := []string{"DROVER_MASTERS=" + c.MasterAddrs}
	out, errOut, code := runDrover(t, env, "client", "logs", id, "--follow")
	if code != 0 || out != want || strings.Contains(errOut, "rotated away") {
		t.Fatalf("logs --follow: exit %d, %d bytes of %d (equal %v), stderr %q", code, len(out), len(want), out == want, errOut)
	}

	d := c.WaitDriver(id, 10*time.Second, "FINISHED", isState(model.DriverFinished))
	start := firstKept(t, filepath.Join(c.Worker(d.WorkerID).Dir, id, "attempt-1"), unitdir.StdoutFile)
	if start == 0 || start%(64<<10) != 0 {
		t.Fatalf("the oldest kept byte is at %d: the log did not rotate at 64 KiB", start)
	}
	out, errOut, code = runDrover(t, env, "client", "logs", id)
	if note := fmt.Sprintf("--- bytes 0 to %d were rotated away ---\n", start); code != 0 || out != want[start:] || errOut != note {
		t.Fatalf("logs after the end: exit %d, %d bytes (want the last %d), stderr %q (want %q)", code, len(out), len(want)-int(start), errOut, note)
	}

	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Masters[0]
	if follower == leader {
		follower = c.Masters[1]
	}
	for _, q := range []string{"offset=0", "offset=0&stale=true"} {
		resp, err := http.Get("http://" + follower.HTTP + "/v1/drivers/" + id + "/logs?" + q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderLogStart) != strconv.FormatInt(start, 10) ||
			resp.Header.Get(api.HeaderLogSize) != strconv.Itoa(len(want)) || string(b) != want[start:] {
			t.Fatalf("follower %s, %s: %d, start %q size %q, %d bytes", follower.ID, q, resp.StatusCode,
				resp.Header.Get(api.HeaderLogStart), resp.Header.Get(api.HeaderLogSize), len(b))
		}
	}
}

// A supervised driver's worker is killed, and the driver runs again as
// attempt 2 on the other worker. While the first worker is down, `logs
// --attempt 1` says so in one line and exits 1; once it is back on its
// work dir, `logs --attempt 1` prints attempt 1's output and `logs` the
// latest attempt's.
func TestLogsOfAnEarlierAttemptAfterARelaunch(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	id := submit(t, c, api.SubmitRequest{Token: "attempt-logs-0123456789", DriverSpec: model.DriverSpec{Supervise: true, Cores: 1, MemoryMB: 64, Argv: []string{"/bin/sh", "-c", `echo "attempt $DROVER_ATTEMPT on $DROVER_WORKER_ID"; exec sleep 300`}}})
	d := c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning))
	first := c.Worker(d.WorkerID)
	env := []string{"DROVER_MASTERS=" + c.MasterAddrs}
	waitFor(t, 10*time.Second, "attempt 1's output", func() bool {
		out, _, _ := runDrover(t, env, "client", "logs", id)
		return out != ""
	})

	first.KillGroup()
	d = c.WaitDriver(id, 30*time.Second, "attempt 2 RUNNING", func(d *model.Driver) bool {
		return d.Attempt == 2 && d.State == model.DriverRunning
	})
	if d.WorkerID == first.ID {
		t.Fatalf("attempt 2 placed on the dead worker %s", first.ID)
	}
	out, errOut, code := runDrover(t, env, "client", "logs", id, "--attempt", "1")
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, "attempt 1 of "+id) || !strings.Contains(errOut, "worker "+first.ID) || !strings.Contains(errOut, "DEAD") {
		t.Fatalf("logs --attempt 1 with its worker dead: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	wantFirst := "attempt 1 on " + first.ID + "\n"
	waitFor(t, 30*time.Second, "attempt 1's worker back", func() bool {
		out, _, code := runDrover(t, env, "client", "logs", id, "--attempt", "1")
		return code == 0 && out == wantFirst
	})
	// Attempt 1 has ended: following it prints it and returns.
	if out, errOut, code := runDrover(t, env, "client", "logs", id, "--attempt", "1", "--follow"); code != 0 || out != wantFirst {
		t.Fatalf("logs --attempt 1 --follow: exit %d, %q, %q", code, out, errOut)
	}
	if out, errOut, code := runDrover(t, env, "client", "logs", id); code != 0 || out != "attempt 2 on "+d.WorkerID+"\n" {
		t.Fatalf("logs of the latest attempt: exit %d, %q, %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(first.Dir, id, "attempt-1")); err != nil {
		t.Fatalf("attempt 1's directory on %s: %v", first.ID, err)
	}
}
