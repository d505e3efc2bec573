package service

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
)

// logFSM is a table with worker w1 at addr, made DEAD when dead.
func logFSM(t *testing.T, addr string, dead bool) *fsm.FSM {
	t.Helper()
	f := fsm.New()
	apply := func(i uint64, cmd model.Command) {
		b, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.ApplyCommand(i, b); res != nil {
			t.Fatal(res)
		}
	}
	apply(1, &model.RegisterWorker{ID: "w1", HTTPAddr: addr, Cores: 1, MemoryMB: 1, Time: 1})
	if dead {
		apply(2, &model.WorkerLost{WorkerID: "w1", Time: 2})
	}
	return f
}

// A log request passed on to a worker carries this master's credential
// (without TLS, the node token), never the caller's token or cookie, and
// the worker's answer comes back with its size and where it starts.
func TestWorkerLogCarriesTheMastersCredential(t *testing.T) {
	var got http.Header
	var query string
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, query = r.Header.Clone(), r.URL.RawQuery
		w.Header().Set(api.HeaderLogSize, "42")
		w.Header().Set(api.HeaderLogStart, "30")
		_, _ = io.WriteString(w, "tail")
	}))
	defer wk.Close()
	f := logFSM(t, strings.TrimPrefix(wk.URL, "http://"), false)
	for _, tc := range []struct {
		workerToken, want string
	}{{"NodeTok-0123456789ABCDEFGHIJ", "Bearer NodeTok-0123456789ABCDEFGHIJ"}, {"", ""}} {
		s := &Core{cfg: Config{Scheme: "http", WorkerToken: tc.workerToken}, Deps: Deps{FSM: f, Workers: wk.Client()}}
		l, err := s.workerLog(context.Background(), logUnit{what: "d", workerID: "w1", path: "/v1/drivers/d/logs"}, LogQuery{Stream: "stderr", Offset: 7, Attempt: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(l.Body)
		l.Body.Close()
		if string(b) != "tail" || l.Size != 42 || l.Start != 30 || query != "attempt=2&offset=7&stream=stderr" {
			t.Fatalf("log %q size %d start %d query %q", b, l.Size, l.Start, query)
		}
		if got.Get("Authorization") != tc.want || got.Get("Cookie") != "" {
			t.Fatalf("headers to the worker with token %q: %v", tc.workerToken, got)
		}
	}
}

// A log the cluster can no longer serve is api.ErrGone, said in one line
// that names the unit and the worker: the worker is unknown, or DEAD and
// silent, or it answers that the directory of the ended unit is no
// longer there. A silent worker that is ALIVE is api.ErrBadGateway: it
// may answer in a moment. A unit that has not ended and has no directory
// yet is the worker's own 404.
func TestWorkerLogSaysWhenTheLogIsGone(t *testing.T) {
	status := http.StatusNotFound
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":"the worker's own words"}`)
	}))
	defer wk.Close()
	up := strings.TrimPrefix(wk.URL, "http://")
	// An address nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()

	unit := logUnit{what: "attempt 1 of d", workerID: "w1", path: "/v1/drivers/d/logs", ended: true}
	for _, tc := range []struct {
		name       string
		f          *fsm.FSM
		unit       logUnit
		status     int
		want       error
		wantInLine []string
	}{
		{"unknown worker", fsm.New(), unit, 0, api.ErrGone, []string{"attempt 1 of d", "w1", "no longer know"}},
		{"dead and silent", logFSM(t, down, true), unit, 0, api.ErrGone, []string{"attempt 1 of d", "w1", "DEAD", "does not answer"}},
		{"alive and silent", logFSM(t, down, false), unit, 0, api.ErrBadGateway, []string{"attempt 1 of d", "w1", "does not answer"}},
		{"directory removed", logFSM(t, up, false), unit, http.StatusNotFound, api.ErrGone, []string{"attempt 1 of d", "w1", "removed"}},
		{"removed, the worker says", logFSM(t, up, false), unit, http.StatusGone, api.ErrGone, []string{"worker w1: the worker's own words"}},
		{"not there yet", logFSM(t, up, false), logUnit{what: "attempt 1 of d", workerID: "w1", path: "/v1/drivers/d/logs"}, http.StatusNotFound,
			api.ErrNotFound, []string{"worker w1: the worker's own words"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status = tc.status
			s := &Core{cfg: Config{Scheme: "http"}, Deps: Deps{FSM: tc.f, Workers: wk.Client()}}
			l, err := s.workerLog(context.Background(), tc.unit, LogQuery{})
			if err == nil {
				l.Body.Close()
				t.Fatal("a log was served")
			}
			if !errors.Is(err, tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line wrapping %v", err, tc.want)
			}
			for _, w := range tc.wantInLine {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestWorkerLogOnlyFromTheWorkerMeant: over TLS a master takes a log only
// from a worker whose certificate names the worker the tables place the
// unit on; another worker's certificate at that address, or one naming no
// worker (unless the masters allow those for an upgrade), gets 502 and
// none of its bytes.
func TestWorkerLogOnlyFromTheWorkerMeant(t *testing.T) {
	dir := t.TempDir()
	caPEM, caKey, err := pki.NewCA("logs test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPath, _, err := pki.WriteFiles(dir, "ca", caPEM, caKey)
	if err != nil {
		t.Fatal(err)
	}
	files := func(role pki.Role, id, name string) pki.Files {
		certPEM, keyPEM, err := pki.Issue(caPEM, caKey, role, id, []string{"127.0.0.1"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := pki.WriteFiles(dir, name, certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return pki.Files{CA: caPath, Cert: cert, Key: key}
	}
	toWorkers, err := files(pki.RoleMaster, "m1", "m1").ClientConfig(pki.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	unit := logUnit{what: "attempt 1 of d", workerID: "w1", path: "/v1/drivers/d/logs"}
	for _, tc := range []struct {
		name     string
		cert     pki.Files
		upgrade  bool
		want     string
		wantLine string
	}{
		{"w1 itself", files(pki.RoleWorker, "w1", "w1"), false, "w1's log", ""},
		{"w2 at w1's address", files(pki.RoleWorker, "w2", "w2"), false, "", "the certificate of w2, not w1's"},
		{"an unbound certificate", files(pki.RoleWorker, "", "old"), false, "", "names no worker: reissue it with drover tls cert --role worker --name w1"},
		{"an unbound certificate while upgrading", files(pki.RoleWorker, "", "old2"), true, "w1's log", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serverTLS, err := tc.cert.ServerConfig(tls.RequireAndVerifyClientCert, pki.RoleMaster)
			if err != nil {
				t.Fatal(err)
			}
			wk := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "w1's log")
			}))
			wk.TLS = serverTLS
			wk.StartTLS()
			defer wk.Close()
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: toWorkers}}
			defer hc.CloseIdleConnections()
			s := &Core{cfg: Config{Scheme: "https", AllowUnboundWorkerCerts: tc.upgrade},
				Deps: Deps{FSM: logFSM(t, strings.TrimPrefix(wk.URL, "https://"), false), Workers: hc}}
			l, err := s.workerLog(context.Background(), unit, LogQuery{})
			if tc.wantLine != "" {
				if err == nil {
					b, _ := io.ReadAll(l.Body)
					l.Body.Close()
					t.Fatalf("served %q", b)
				}
				if !errors.Is(err, api.ErrBadGateway) || !strings.Contains(err.Error(), tc.wantLine) {
					t.Fatalf("error %q, want a 502 saying %q", err, tc.wantLine)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(l.Body)
			l.Body.Close()
			if string(b) != tc.want {
				t.Fatalf("log %q, want %q", b, tc.want)
			}
		})
	}
}
