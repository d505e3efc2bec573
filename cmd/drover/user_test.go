package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

// submit --user names the user the program runs as; a name the master
// would refuse is refused in one line before anything is sent. status
// shows the user, and status --json and list --json carry it as "user".
func TestSubmitUserFlag(t *testing.T) {
	f := newFakeMaster(t)
	f.placed = func(id string) *model.Driver {
		return &model.Driver{ID: id, State: model.DriverRunning, WorkerID: "w1", Attempt: 1, DriverSpec: model.DriverSpec{User: "etl"},
			Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning}}}
	}
	stdout, stderr, code := drover("client", "--masters", f.addr(), "submit", "--user", "etl", "--", "/bin/true")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	for _, bad := range []struct{ user, want string }{
		{"Root", "drover: --user: user \"Root\" is not a portable user name"},
		{"1000", "drover: --user: user \"1000\" is a numeric uid"},
		{strings.Repeat("a", model.MaxUserLen+1), "drover: --user: user name exceeds 32 bytes"},
	} {
		stdout, stderr, code := drover("client", "--masters", f.addr(), "submit", "--user", bad.user, "--", "/bin/true")
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, bad.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("--user %s: exit %d, stdout %q, stderr %q; want exit 1 with one line %q", bad.user, code, stdout, stderr, bad.want)
		}
	}
	f.mu.Lock()
	if len(f.submitted) != 1 || f.submitted[0].User != "etl" {
		t.Fatalf("submissions sent %+v, want one as etl", f.submitted)
	}
	f.mu.Unlock()

	status, _, code := drover("client", "--masters", f.addr(), "status", id)
	if code != 0 || !strings.Contains(status, "user:       etl\n") {
		t.Fatalf("status: exit %d\n%s", code, status)
	}
	status, _, code = drover("client", "--masters", f.addr(), "status", id, "--json")
	list, _, code2 := drover("client", "--masters", f.addr(), "list", "--json")
	var one map[string]any
	var all []map[string]any
	if code != 0 || code2 != 0 || json.Unmarshal([]byte(status), &one) != nil || json.Unmarshal([]byte(list), &all) != nil ||
		one["user"] != "etl" || len(all) != 1 || all[0]["user"] != "etl" {
		t.Fatalf("status --json: exit %d %s; list --json: exit %d %s", code, status, code2, list)
	}
	if help, _, _ := drover("client", "submit", "--help"); !strings.Contains(help, "--user string") || !strings.Contains(help, "--allowed-users") {
		t.Fatalf("submit --help does not describe --user:\n%s", help)
	}
}
