package systest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// stagingServer serves artifacts that fail each in its own way, and
// notes when each path was first asked for.
type stagingServer struct {
	*httptest.Server
	mu    sync.Mutex
	first map[string]time.Time
	// unavailable is how many requests for /flaky.sh are answered 503
	// before it is served.
	unavailable int
}

const stagedApp = "#!/bin/sh\necho staged\n"

func newStagingServer(t *testing.T) *stagingServer {
	s := &stagingServer{first: map[string]time.Time{}, unavailable: 2}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if _, ok := s.first[r.URL.Path]; !ok {
			s.first[r.URL.Path] = time.Now()
		}
		flaky := r.URL.Path == "/flaky.sh" && s.unavailable > 0
		if flaky {
			s.unavailable--
		}
		s.mu.Unlock()
		switch r.URL.Path {
		case "/503.sh":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/stall.sh":
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/app.sh":
			w.Write([]byte(stagedApp))
		case "/flaky.sh":
			if flaky {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte(stagedApp))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// askedAt is when path was first asked for; zero when it was not.
func (s *stagingServer) askedAt(path string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first[path]
}

// refusedURL is a URL on a loopback port nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/app.sh"
}

// TestStagingFailuresAreSeenAtOnce: while a driver's artifact cannot be
// fetched, its driver says why within a second of the server's answer
// (two for an end, which waits for the runner's exit), staying SUBMITTED, in status (the client's read), the event stream and
// Spark REST status: a connection refused, a 503 and a stall as the
// download's progress line ("fetching URL: 503 Service Unavailable, try
// 1, next in 1s"); a 404 and a checksum mismatch end an unsupervised
// driver FAILED at once with the reason, and a supervised one says that
// its staging failed and when it is tried again. A supervised 404 bounded
// by --max-restarts 1 ends FAILED after two failed stagings. submit
// --wait prints each change of the line on stderr.
func TestStagingFailuresAreSeenAtOnce(t *testing.T) {
	c, rest := sparkRESTCluster(t, testcluster.Options{Workers: 1, WorkerCores: 8,
		WorkerArgs: []string{"--artifact-stall-timeout", "500ms"}}, "/bin/echo {{mainClass}}")
	srv := newStagingServer(t)
	cl := c.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Every driver event, from the first entry on.
	var mu sync.Mutex
	messages := map[string][]string{}
	stream := cl.Events(ctx, client.EventQuery{Kinds: []api.EventKind{api.EventDriver}})
	go func() {
		for e := range stream.C() {
			if e.Driver != nil {
				mu.Lock()
				messages[e.ID] = append(messages[e.ID], string(e.Driver.State)+": "+e.Driver.Message)
				mu.Unlock()
			}
		}
	}()
	sawEvent := func(id, want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range messages[id] {
			if m == want {
				return true
			}
		}
		return false
	}
	l, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{}
	sparkStatus := func(id string) sparkAnswer {
		return sparkCall(t, hc, "http://"+rest[l.ID]+"/v1/submissions/status/"+id, http.MethodGet, "", "")
	}

	// await polls the driver until cond holds, and returns it and when
	// it was first seen so.
	await := func(id, what string, cond func(*model.Driver) bool) (*model.Driver, time.Time) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			d, err := cl.Driver(rctx, id)
			rcancel()
			if err == nil && cond(d) {
				return d, time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("driver %s: not %s within 30s; last %+v, %v", id, what, d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	refused := refusedURL(t)
	for _, tc := range []struct {
		name, url string
		supervise bool
		// seen is when the worker saw the failure: the server's first
		// answer, or, for a stall, that plus the stall timeout; nil for
		// a connection refused, which no server can time.
		seen  func() time.Time
		state model.DriverState
		want  string
	}{
		{"connection refused", refused, false, nil, model.DriverSubmitted,
			"fetching " + refused + ": connection refused, try 1, next in 1s"},
		{"503", srv.URL + "/503.sh", false, func() time.Time { return srv.askedAt("/503.sh") }, model.DriverSubmitted,
			"fetching " + srv.URL + "/503.sh: 503 Service Unavailable, try 1, next in 1s"},
		{"stall", srv.URL + "/stall.sh", false, func() time.Time { return srv.askedAt("/stall.sh").Add(500 * time.Millisecond) }, model.DriverSubmitted,
			"fetching " + srv.URL + "/stall.sh: timed out: no data for 500ms, try 1, next in 1s"},
		{"404", srv.URL + "/404.sh", false, func() time.Time { return srv.askedAt("/404.sh") }, model.DriverFailed,
			"fetch " + srv.URL + "/404.sh: 404 Not Found"},
		{"supervised 404", srv.URL + "/gone.sh", true, func() time.Time { return srv.askedAt("/gone.sh") }, model.DriverSubmitted,
			"fetch " + srv.URL + "/gone.sh: 404 Not Found; staging again in 1s"},
		{"checksum mismatch", srv.URL + "/app.sh" + checksum("other bytes"), false, func() time.Time { return srv.askedAt("/app.sh") }, model.DriverFailed,
			fmt.Sprintf("fetch %s/app.sh: checksum mismatch: want %s, got %s", srv.URL, strings.TrimPrefix(checksum("other bytes"), "?checksum=sha256:"), strings.TrimPrefix(checksum(stagedApp), "?checksum=sha256:"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./app.sh"}, Cores: 1, MemoryMB: 64, Supervise: tc.supervise, Artifacts: []model.Artifact{{Source: tc.url}}}})
			d, at := await(id, "saying "+tc.want, func(d *model.Driver) bool { return d.Message == tc.want })
			if d.State != tc.state || d.Staging != (tc.state == model.DriverSubmitted) {
				t.Fatalf("driver %s %s (staging %t): %q; want %s", id, d.State, d.Staging, d.Message, tc.state)
			}
			// A progress line goes out as the runner sees the failure; an
			// end once the runner has exited too, and under the race
			// detector a process sleeps a second at its exit (GORACE
			// atexit_sleep_ms): ends took 1.05 to 1.15 s with -race, 21
			// to 44 ms without.
			within := time.Second
			if tc.state.Terminal() {
				within = 2 * time.Second
			}
			if tc.seen != nil {
				if took := at.Sub(tc.seen()); took > within {
					t.Errorf("the status said it %s after the server answered, want within %s", took.Round(time.Millisecond), within)
				} else {
					t.Logf("the status said it %s after the server answered", took.Round(time.Millisecond))
				}
			}
			waitFor(t, 5*time.Second, "the line in the event stream", func() bool { return sawEvent(id, string(tc.state)+": "+tc.want) })
			if a := sparkStatus(id); a.str("driverState") != string(tc.state) || a.str("message") != tc.want {
				t.Fatalf("Spark REST status: %s, want %s saying %q", a.raw, tc.state, tc.want)
			}
		})
	}

	t.Run("supervised 404 bounded", func(t *testing.T) {
		id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./app.sh"}, Cores: 1, MemoryMB: 64, Supervise: true, MaxRestarts: 1, Artifacts: []model.Artifact{{Source: srv.URL + "/missing.sh"}}}})
		d := c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
		if want := "the last staging failed: fetch " + srv.URL + "/missing.sh: 404 Not Found"; d.State != model.DriverFailed ||
			!strings.HasPrefix(d.Message, "2 runs failed in ") || !strings.Contains(d.Message, "more than the 1 restarts allowed") || !strings.HasSuffix(d.Message, want) {
			t.Fatalf("driver %s: %q; want FAILED after 2 failed stagings, ending %q", d.State, d.Message, want)
		}
	})

	t.Run("submit --wait", func(t *testing.T) {
		url := srv.URL + "/flaky.sh"
		out, errOut, code := runDrover(t, []string{"DROVER_MASTERS="}, "client", "submit", "--masters", c.MasterAddrs, "--wait",
			"--artifact", url, "--", "./flaky.sh")
		if code != 0 || !sparkDriverID.MatchString(strings.TrimSpace(out)) {
			t.Fatalf("submit --wait: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		for _, want := range []string{
			"SUBMITTED attempt 1 on w1: fetching " + url + ": 503 Service Unavailable, try 1, next in 1s\n",
			"SUBMITTED attempt 1 on w1: fetching " + url + ": 503 Service Unavailable, try 2, next in 2s\n",
		} {
			if strings.Count(errOut, want) != 1 {
				t.Fatalf("submit --wait printed %q not once:\n%s", want, errOut)
			}
		}
	})
}
