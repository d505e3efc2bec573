package worker

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/transport"
	"github.com/drover-project/drover/worker/unitdir"
)

// logServer is the part of the worker that answers HTTP: the units' logs
// for the masters (Spark's worker log pages), health and metrics. It owns
// the server; it reads the record (tombstones) and the janitor's words
// for a removed directory, and nothing under the workerState's lock.
type logServer struct {
	cfg       Config
	log       *slog.Logger
	db        *store
	metrics   *workerMetrics
	janitor   *janitor
	server    *http.Server
	serveDone chan struct{}
}

// start serves on ln, through gate, until stop.
func (ls *logServer) start(ln net.Listener, gate *transport.Gate) {
	ls.server = ls.newServer(gate)
	ls.serveDone = make(chan struct{})
	go func() {
		defer close(ls.serveDone)
		if err := ls.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ls.log.Error("http server stopped", "err", err)
		}
	}()
}

// ExecutorLogsPath is the path pattern (net/http.ServeMux syntax) of an
// executor's logs on a worker's HTTP server: {app} is the app ID and {id}
// the executor ID. A GET takes stream=stdout|stderr and offset=N, as the
// driver logs do, and answers with the bytes, api.HeaderLogSize and
// api.HeaderLogStart. A master serves the same path and proxies it to the
// executor's worker.
const ExecutorLogsPath = "/v1/apps/{app}/executors/{id}/logs"

// newServer serves, under /v1/:
//
//	GET /v1/drivers/{id}/logs?stream=stdout|stderr&offset=N&attempt=K -> bytes
//	GET /v1/apps/{app}/executors/{id}/logs?stream=stdout|stderr&offset=N -> bytes
//	GET /v1/health -> {"status":"ok","worker_id":ID}
//
// and Prometheus metrics at GET /metrics (MetricsPath). Every path admits
// the same callers: anyone without TLS or a token, otherwise masters only
// (a master certificate, or without TLS the node token); gate stands in
// front of them all.
//
// Errors are an api.Error body: 400 for a malformed request, 404 for a
// driver attempt or executor this worker has no directory for, 410 for
// one whose directory its cleanup removed (for a day after; 404 later).
func (ls *logServer) newServer(gate *transport.Gate) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/drivers/{id}/logs", ls.handleDriverLogs)
	mux.HandleFunc("GET "+ExecutorLogsPath, ls.handleExecutorLogs)
	mux.HandleFunc("GET /v1/health", ls.handleHealth)
	mux.Handle("GET "+MetricsPath, ls.metrics.handler)
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		writeError(rw, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return &http.Server{
		Handler:           gate.Wrap(ls.requireMaster(mux), writeRefusal),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Long enough to send a large log over a slow link; a follower
		// asks in pieces anyway.
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
		// Handshake failures and the like are what any client can cause,
		// as often as it likes: debug, not info.
		ErrorLog: slog.NewLogLogger(ls.log.With("component", "http").Handler(), slog.LevelDebug),
	}
}

// requireMaster admits only masters when the cluster uses tokens without
// TLS: they present the node token. With TLS the listener already refused
// every certificate but a master's.
func (ls *logServer) requireMaster(h http.Handler) http.Handler {
	tok := ls.cfg.mastersToken()
	if tok == "" {
		return h
	}
	want := sha256.Sum256([]byte("Bearer " + tok))
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			writeError(rw, http.StatusUnauthorized, "only masters may call a worker: they present the node token")
			return
		}
		h.ServeHTTP(rw, r)
	})
}

func (ls *logServer) handleHealth(rw http.ResponseWriter, r *http.Request) {
	writeJSON(rw, http.StatusOK, map[string]string{"status": "ok", "worker_id": ls.cfg.ID})
}

// handleDriverLogs serves a driver attempt's stdout or stderr, the latest
// attempt's unless the query names one.
func (ls *logServer) handleDriverLogs(rw http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := ids.CheckDriver(id); err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	name, offset, ok := logQuery(rw, r)
	if !ok {
		return
	}
	var n int
	if s := r.URL.Query().Get("attempt"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			writeError(rw, http.StatusBadRequest, fmt.Sprintf("attempt %q must be a positive number", s))
			return
		}
		n = v
	} else {
		v, err := latestAttempt(filepath.Join(ls.cfg.WorkDir, id))
		if err != nil {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("driver %s has no attempt on worker %s", id, ls.cfg.ID))
			return
		}
		n = v
	}
	ls.serveLog(rw, attemptKey(id, n), name, offset)
}

// handleExecutorLogs serves an executor's stdout or stderr.
func (ls *logServer) handleExecutorLogs(rw http.ResponseWriter, r *http.Request) {
	app, id := r.PathValue("app"), r.PathValue("id")
	if err := ids.CheckApp(app); err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	// Only the canonical form: the ID names a directory.
	n, err := strconv.Atoi(id)
	if err != nil || n < 0 || strconv.Itoa(n) != id {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("executor ID %q must be a number", id))
		return
	}
	name, offset, ok := logQuery(rw, r)
	if !ok {
		return
	}
	ls.serveLog(rw, executorKey(app, n), name, offset)
}

// logQuery reads the stream and offset parameters of a log request,
// answering 400 itself when they are malformed.
func logQuery(rw http.ResponseWriter, r *http.Request) (name string, offset int64, ok bool) {
	q := r.URL.Query()
	name = unitdir.StdoutFile
	switch s := q.Get("stream"); s {
	case "", "stdout":
	case "stderr":
		name = unitdir.StderrFile
	default:
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("stream %q must be stdout or stderr", s))
		return "", 0, false
	}
	if s := q.Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeError(rw, http.StatusBadRequest, fmt.Sprintf("offset %q must be a byte count", s))
			return "", 0, false
		}
		offset = n
	}
	return name, offset, true
}

// serveLog serves stream name of unit k from logical offset on, across
// its rotated files (unitdir.OpenLog). Every path element comes from a
// checked driver or app ID, a number or a fixed name; the files are opened
// through an os.Root on the work dir besides, so no request, and no link a
// program plants, reaches outside it.
func (ls *logServer) serveLog(rw http.ResponseWriter, k unitKey, name string, offset int64) {
	root, err := os.OpenRoot(ls.cfg.WorkDir)
	if err != nil {
		writeError(rw, http.StatusInternalServerError, "work dir: "+err.Error())
		return
	}
	defer root.Close()
	dir, err := filepath.Rel(ls.cfg.WorkDir, k.dir(ls.cfg.WorkDir))
	if err != nil || !filepath.IsLocal(dir) {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("%s is outside the work dir", k))
		return
	}
	unit, err := root.OpenRoot(dir)
	if err != nil {
		if t, ok := ls.db.tombstone(k); ok {
			writeError(rw, http.StatusGone, fmt.Sprintf("%s of %s was %s", name, k, ls.janitor.removedReason(t)))
			return
		}
		writeError(rw, http.StatusNotFound, fmt.Sprintf("%s has no %s %d on worker %s", k.id, k.kind.info().nAttr, k.n, ls.cfg.ID))
		return
	}
	defer unit.Close()
	l, err := unitdir.OpenLog(unit, name, offset)
	if err != nil {
		writeError(rw, http.StatusForbidden, fmt.Sprintf("cannot open %s of %s: %v", name, k, err))
		return
	}
	defer l.Close()
	rw.Header().Set(api.HeaderLogSize, strconv.FormatInt(l.Size, 10))
	rw.Header().Set(api.HeaderLogStart, strconv.FormatInt(l.Start, 10))
	// Shown as text in a browser, never sniffed into anything else.
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.Header().Set("Content-Length", strconv.FormatInt(l.End-l.Start, 10))
	rw.WriteHeader(http.StatusOK)
	_, _ = io.Copy(rw, l)
}

// latestAttempt returns the highest N of the attempt-N directories in
// driverDir.
func latestAttempt(driverDir string) (int, error) {
	entries, err := os.ReadDir(driverDir)
	if err != nil {
		return 0, err
	}
	latest := 0
	for _, e := range entries {
		s, ok := strings.CutPrefix(e.Name(), "attempt-")
		if !ok || !e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(s); err == nil && n > latest {
			latest = n
		}
	}
	if latest == 0 {
		return 0, fs.ErrNotExist
	}
	return latest, nil
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

func writeError(rw http.ResponseWriter, status int, msg string) {
	writeJSON(rw, status, api.Error{Error: msg})
}

// writeRefusal answers a refusal of the gate with its code and status.
func writeRefusal(rw http.ResponseWriter, err error) {
	_, status := api.CodeOf(err)
	writeJSON(rw, status, api.ErrorOf(err))
}

func (ls *logServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := ls.server.Shutdown(ctx); err != nil {
		ls.log.Warn("http server shutdown", "err", err)
		_ = ls.server.Close()
	}
	<-ls.serveDone
}
