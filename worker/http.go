package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/runner"
)

// HeaderLogSize is set on every log answer to the log file's size in bytes
// when the answer was made; the body holds the bytes from the requested
// offset up to that size, so a follower asks next from offset+len(body).
const HeaderLogSize = "X-Drover-Log-Size"

// newServer serves, under /v1/:
//
//	GET /v1/drivers/{id}/logs?stream=stdout|stderr&offset=N&attempt=K -> bytes
//	GET /v1/health -> {"status":"ok","worker_id":ID}
//
// Errors are an api.Error body: 400 for a malformed request, 404 for a
// driver or attempt this worker has no directory for.
func (w *Worker) newServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/drivers/{id}/logs", w.handleLogs)
	mux.HandleFunc("GET /v1/health", w.handleHealth)
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		writeError(rw, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Long enough to send a large log over a slow link; a follower
		// asks in pieces anyway.
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
	}
}

func (w *Worker) handleHealth(rw http.ResponseWriter, r *http.Request) {
	writeJSON(rw, http.StatusOK, map[string]string{"status": "ok", "worker_id": w.cfg.ID})
}

// handleLogs serves a driver's stdout or stderr from this worker's work
// dir. Every path element comes from a checked driver ID, a number or a
// fixed name, so no request reaches outside the work dir.
func (w *Worker) handleLogs(rw http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !driverIDPattern.MatchString(id) {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("invalid driver ID %q", id))
		return
	}
	q := r.URL.Query()
	name := runner.StdoutFile
	switch s := q.Get("stream"); s {
	case "", "stdout":
	case "stderr":
		name = runner.StderrFile
	default:
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("stream %q must be stdout or stderr", s))
		return
	}
	var offset int64
	if s := q.Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeError(rw, http.StatusBadRequest, fmt.Sprintf("offset %q must be a byte count", s))
			return
		}
		offset = n
	}
	var n int
	if s := q.Get("attempt"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			writeError(rw, http.StatusBadRequest, fmt.Sprintf("attempt %q must be a positive number", s))
			return
		}
		n = v
	} else {
		v, err := latestAttempt(filepath.Join(w.cfg.WorkDir, id))
		if err != nil {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("driver %s has no attempt on worker %s", id, w.cfg.ID))
			return
		}
		n = v
	}
	dir := attemptDir(w.cfg.WorkDir, id, n)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		writeError(rw, http.StatusNotFound, fmt.Sprintf("driver %s has no attempt %d on worker %s", id, n, w.cfg.ID))
		return
	}
	// The program owns its directory and could swap its log for a link
	// to a file it may not show; O_NOFOLLOW refuses that.
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	var size int64
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Not launched yet: an empty log.
	case err != nil:
		writeError(rw, http.StatusForbidden, fmt.Sprintf("cannot open %s of %s attempt %d", name, id, n))
		return
	default:
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			writeError(rw, http.StatusForbidden, fmt.Sprintf("%s of %s attempt %d is not a regular file", name, id, n))
			return
		}
		size = st.Size()
	}
	length := max(size-offset, 0)
	rw.Header().Set(HeaderLogSize, strconv.FormatInt(size, 10))
	rw.Header().Set("Content-Type", "application/octet-stream")
	rw.Header().Set("Content-Length", strconv.FormatInt(length, 10))
	rw.WriteHeader(http.StatusOK)
	if length > 0 {
		_, _ = io.Copy(rw, io.NewSectionReader(f, offset, length))
	}
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
