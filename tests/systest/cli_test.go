package systest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestCLIAsPeopleTypeIt runs the drover binary against a real cluster the
// way people type it: the connect flags after the command, list's
// filters, a --timeout that is not positive, and each exit code: 0 for a
// driver that runs or finishes, 1 for a refusal or a failure, 2 for no
// master, 3 for a driver no worker can hold, 4 for one still queued at
// --timeout.
func TestCLIAsPeopleTypeIt(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerCores: 2})
	// The masters come only from the flags.
	env := []string{"DROVER_MASTERS="}
	m := []string{"--masters", c.MasterAddrs}
	cli := func(args ...string) (stdout, stderr string, code int) {
		return runDrover(t, env, append([]string{"client"}, args...)...)
	}
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}

	out, errOut, code := cli(append(append([]string{"submit"}, m...), "--name", "cli-ok", "--wait", "--", "/bin/echo", "--masters", "x")...)
	ok := lastLine(out)
	if code != 0 || !sparkDriverID.MatchString(ok) {
		t.Fatalf("submit --wait of a program that exits 0: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if logs, _, code := cli(append([]string{"logs", ok}, m...)...); code != 0 || logs != "--masters x\n" {
		t.Fatalf("the program's own arguments were taken for flags: logs %q, exit %d", logs, code)
	}
	out, errOut, code = cli(append(append([]string{"submit", "--name", "cli-fails", "--wait"}, m...), "--", "/bin/false")...)
	failed := lastLine(out)
	if code != 1 || !sparkDriverID.MatchString(failed) || !strings.Contains(errOut, "FAILED") {
		t.Fatalf("submit --wait of a program that exits 1: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A driver that fills the worker runs (0); the next waits for room
	// and is still queued at --timeout (4); one larger than the worker is
	// queued for good (3). Each prints its ID and says where it stands.
	out, errOut, code = cli(append(append([]string{"submit", "--name", "cli-sleeps", "--driver-cores", "2", "--timeout", "20s"}, m...), "--", "/bin/sleep", "300")...)
	sleeper := lastLine(out)
	if code != 0 || !strings.Contains(errOut, "RUNNING") {
		t.Fatalf("submit of a driver that runs: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	start := time.Now()
	out, errOut, code = cli(append(m, "submit", "--timeout", "2s", "--", "/bin/true")...)
	queued := lastLine(out)
	if code != 4 || !sparkDriverID.MatchString(queued) || !strings.Contains(errOut, "not RUNNING after --timeout 2s") ||
		!strings.Contains(errOut, "SUBMITTED") || time.Since(start) > 10*time.Second {
		t.Fatalf("submit of a driver that waits for room: exit %d after %s, stdout %q, stderr %q", code, time.Since(start), out, errOut)
	}
	out, errOut, code = cli(append(append([]string{"submit", "--driver-cores", "3"}, m...), "--", "/bin/true")...)
	unplaceable := lastLine(out)
	if code != 3 || !sparkDriverID.MatchString(unplaceable) || !strings.Contains(errOut, api.ReasonUnplaceable) {
		t.Fatalf("submit of a driver no worker can hold: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// list's filters, on either side of the flags, in text and JSON.
	ids := func(args ...string) []string {
		t.Helper()
		out, errOut, code := cli(append(append([]string{"list", "--json"}, args...), m...)...)
		var ds []model.Driver
		if err := json.Unmarshal([]byte(out), &ds); code != 0 || err != nil {
			t.Fatalf("list --json %v: exit %d, %v, stderr %q", args, code, err, errOut)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.ID)
		}
		return got
	}
	for _, f := range []struct {
		args []string
		want []string
	}{
		{[]string{"--state", "finished,FAILED"}, []string{ok, failed}},
		{[]string{"--name", "cli-*", "--state", "running"}, []string{sleeper}},
		{[]string{"--state", "submitted"}, []string{queued, unplaceable}},
		{[]string{"--worker", "w1", "--name", "cli-f*"}, []string{failed}},
	} {
		if got := ids(f.args...); strings.Join(got, " ") != strings.Join(f.want, " ") {
			t.Errorf("list %v: %v, want %v", f.args, got, f.want)
		}
	}
	table, _, code := cli(append([]string{"list", "--state", "SUBMITTED"}, m...)...)
	if rows := strings.Split(strings.TrimSpace(table), "\n"); code != 0 || len(rows) != 3 || !strings.Contains(rows[1], "(waiting)") {
		t.Fatalf("list of waiting drivers: exit %d\n%s", code, table)
	}

	// Refusals: one line on stderr, exit 1 (bad input and refused
	// requests) or 2 (no master), and nothing changes.
	l, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := stateHash(t, l)
	for _, r := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"submit", "--driver-cores", "0", "--", "/bin/true"}, 1, "--driver-cores 0 must be from 1 to 65536"},
		{[]string{"list", "--timeout", "0"}, 1, "--timeout must be positive"},
		{[]string{"--timeout", "-1s", "list"}, 1, "--timeout must be positive"},
		{[]string{"list", "--state", "DONE"}, 1, "is not a driver state"},
		{[]string{"list", "--name", "["}, 1, "is not a glob"},
		{[]string{"status", "--masters", "127.0.0.1:1", "--timeout", "1s", ok}, 2, "no master answered with a leader"},
	} {
		_, errOut, code := cli(append(append([]string{}, m...), r.args...)...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != r.code || len(lines) != 1 || !strings.Contains(lines[0], r.want) {
			t.Errorf("drover client %v: exit %d, stderr %q; want %d and one line with %q", r.args, code, errOut, r.code, r.want)
		}
	}
	if after := stateHash(t, l); after != before {
		t.Fatal("refused CLI calls changed the tables")
	}

	// The operator's commands take their flags after the command too.
	peers, errOut, code := runDrover(t, env, append([]string{"operator", "raft", "list-peers"}, m...)...)
	if code != 0 || strings.Count(peers, " yes\n") != len(c.Masters) {
		t.Fatalf("operator raft list-peers --masters: exit %d\n%s%s", code, peers, errOut)
	}
}
