package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
)

// jsonServer answers every request with v as JSON.
func jsonServer(t *testing.T, v any) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// client leader names the leader a follower names only once that master
// confirms it leads: not a dead one, nor one that names another.
func TestClientLeaderIsConfirmed(t *testing.T) {
	t.Setenv("DROVER_MASTERS", "")
	live := api.Health{ID: "m3", Status: "ok", Leader: "m3", Checks: []api.Check{{Name: api.CheckLeader, OK: true, Message: "leader m3"}}}
	deposed := api.Health{ID: "m3", Status: "ok", Leader: "m2", Checks: []api.Check{{Name: api.CheckLeader, OK: true, Message: "leader m2"}}}
	for _, tc := range []struct {
		name       string
		leaderHTTP string
		code       int
		stdout     string
		stderr     string
	}{
		{"dead", "127.0.0.1:1", 2, "", "master m1 names leader m3, which does not answer"},
		{"deposed", jsonServer(t, deposed), 2, "", `master m1 names leader m3, which does not confirm it (it names "m2")`},
		{"no address", "", 2, "", "master m1 names leader m3 without its address"},
		{"live", jsonServer(t, live), 0, "m3\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			follower := jsonServer(t, api.State{ID: "m1", Role: "Follower", Leader: "m3", LeaderHTTP: tc.leaderHTTP})
			stdout, stderr, code := drover("client", "leader", "--timeout", "1s", "--masters", follower)
			if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q and %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
