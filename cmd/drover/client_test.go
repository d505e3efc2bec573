package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// fakeMaster answers the few API calls the CLI's parsing tests make, as
// a leader would, and records the submissions it takes.
type fakeMaster struct {
	*httptest.Server
	mu        sync.Mutex
	drivers   []*model.Driver
	submitted []api.SubmitRequest
}

func newFakeMaster(t *testing.T, drivers ...*model.Driver) *fakeMaster {
	f := &fakeMaster{drivers: drivers}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/drivers", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		reply(w, f.drivers)
	})
	mux.HandleFunc("POST /v1/drivers", func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.submitted = append(f.submitted, req)
		id := "driver-20260101000000-0100"
		f.drivers = append(f.drivers, &model.Driver{ID: id, State: model.DriverRunning, WorkerID: "w1", Attempt: 1,
			Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning}}})
		reply(w, api.SubmitResponse{DriverID: id})
	})
	mux.HandleFunc("GET /v1/drivers/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, d := range f.drivers {
			if d.ID == r.PathValue("id") {
				reply(w, d)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		reply(w, api.Error{Error: "unknown driver", Code: api.CodeUnknownDriver})
	})
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.State{ID: "m1", Role: "Leader", Leader: "m1"})
	})
	mux.HandleFunc("GET /v1/operator/raft/peers", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.RaftPeers{Peers: []api.Master{{ID: "m1", RaftAddr: "127.0.0.1:1", Suffrage: "Voter", Leader: true}}})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// addr is the fake's host:port, as --masters takes it.
func (f *fakeMaster) addr() string { return strings.TrimPrefix(f.URL, "http://") }

// drover runs the CLI in this process and returns its output and exit
// code.
func drover(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	switch args[0] {
	case "client":
		code = runClient(args[1:], &out, &errOut)
	case "operator":
		code = runOperator(args[1:], &out, &errOut)
	}
	return out.String(), errOut.String(), code
}

// The connect flags work before the command and after it, the later
// winning; --timeout must be positive; a program's own arguments after
// "--" are never taken for them.
func TestConnectFlagsEitherSide(t *testing.T) {
	t.Setenv("DROVER_MASTERS", "")
	f := newFakeMaster(t)
	dead := "127.0.0.1:1"
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"client", "--masters", f.addr(), "list"}, 0, ""},
		{[]string{"client", "list", "--masters", f.addr()}, 0, ""},
		{[]string{"client", "--masters", dead, "--timeout", "1s", "list", "--masters", f.addr()}, 0, ""},
		{[]string{"client", "leader", "--timeout", "5s", "--masters", f.addr()}, 0, ""},
		{[]string{"operator", "raft", "list-peers", "--masters", f.addr()}, 0, ""},
		{[]string{"operator", "--timeout", "5s", "raft", "list-peers", "--stale", "--masters", f.addr()}, 0, ""},
		{[]string{"client", "list"}, 1, "no master addresses given"},
		{[]string{"client", "list", "--masters", f.addr(), "--timeout", "0"}, 1, "--timeout must be positive, got 0s"},
		{[]string{"client", "--timeout", "-5s", "list", "--masters", f.addr()}, 1, "--timeout must be positive, got -5s"},
		{[]string{"operator", "raft", "list-peers", "--masters", f.addr(), "--timeout", "0s"}, 1, "--timeout must be positive"},
		{[]string{"client", "list", "--help"}, 0, "--timeout duration"},
	} {
		_, stderr, code := drover(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("drover %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.err)
		}
	}
	if _, stderr, code := drover("client", "--help"); code != 0 || !strings.Contains(stderr, "positive (default 30s)") {
		t.Errorf("client --help: exit %d, does not show the default timeout: %s", code, stderr)
	}

	stdout, stderr, code := drover("client", "submit", "--masters", f.addr(), "--", "/bin/prog", "--masters", "elsewhere", "--timeout", "0")
	if code != 0 || !strings.HasSuffix(stdout, "driver-20260101000000-0100\n") {
		t.Fatalf("submit: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if argv := f.submitted[0].Argv; !slices.Equal(argv, []string{"/bin/prog", "--masters", "elsewhere", "--timeout", "0"}) {
		t.Fatalf("the program got %q", argv)
	}
}
