package master

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/sparkrest"
)

// startSparkREST starts the Spark REST submission listener when
// cfg.SparkRESTPort is set. It is secured as the API is, because it is the
// same door: it binds the same address, holds each client IP to the same
// connection bound, serves TLS with the API's config, and every request it
// takes is answered by the API's own handler (sparkBackend), so tokens,
// certificate roles, validation, the per-client submission bound and
// forwarding to the leader are the API's.
func (m *Master) startSparkREST() error {
	if m.cfg.SparkRESTPort == 0 {
		return nil
	}
	launcher, err := sparkrest.NewLauncher(m.cfg.SparkLauncher)
	if err != nil {
		return fmt.Errorf("--spark-launcher: %w", err)
	}
	addr := net.JoinHostPort(m.cfg.BindIP, strconv.Itoa(m.cfg.SparkRESTPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("spark REST listen: %w", err)
	}
	ln = m.conns.Wrap(ln)
	if m.tls.http != nil {
		ln = tls.NewListener(ln, m.tls.http)
	}
	m.sparkServer = m.newHTTPServer(sparkrest.NewHandler(sparkBackend{m}, launcher))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.sparkServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("spark REST server", "err", err)
		}
	}()
	m.log.Info("serving Spark REST submissions", "addr", ln.Addr().String(), "tls", m.tls.http != nil,
		"launcher", launcher.Argv())
	return nil
}

// sparkBackend answers package sparkrest by serving an internal request
// through the master's own API handler, carrying the caller's credentials,
// address and TLS state: one code path decides, as if the caller had
// called /v1/drivers itself.
type sparkBackend struct{ m *Master }

func (b sparkBackend) Authorize(r *http.Request, a auth.Access) error {
	passed := false
	rec := newRecorder()
	b.m.guard.Wrap(a, func(http.ResponseWriter, *http.Request) { passed = true })(rec, r)
	if passed {
		return nil
	}
	return rec.statusError()
}

func (b sparkBackend) Submit(r *http.Request, req api.SubmitRequest) (api.SubmitResponse, error) {
	var out api.SubmitResponse
	err := b.call(r, http.MethodPost, "/v1/drivers", req, &out)
	return out, err
}

func (b sparkBackend) Driver(r *http.Request, id string) (*model.Driver, error) {
	var d model.Driver
	if err := b.call(r, http.MethodGet, "/v1/drivers/"+url.PathEscape(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (b sparkBackend) Kill(r *http.Request, id string) error {
	return b.call(r, http.MethodPost, "/v1/drivers/"+url.PathEscape(id)+"/kill", nil, &api.KillResponse{})
}

// WorkerHostPort reads this master's own tables: the address is only
// shown, and a worker's address seldom changes.
func (b sparkBackend) WorkerHostPort(workerID string) string {
	if w, ok := b.m.fsm.Worker(workerID); ok {
		return w.HTTPAddr
	}
	return ""
}

// call serves method path (with in as its JSON body) through the API
// handler on behalf of r and decodes a 200 answer into out; any other
// answer is a *sparkrest.StatusError.
func (b sparkBackend) call(r *http.Request, method, path string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, body)
	if err != nil {
		return err
	}
	// Only what identifies the caller passes: its token, its address (for
	// the per-client bounds) and its TLS state (for certificate roles).
	// Other headers, X-Drover-Forwarded among them, do not.
	req.RequestURI = path
	req.RemoteAddr = r.RemoteAddr
	req.TLS = r.TLS
	req.Host = r.Host
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := newRecorder()
	b.m.server.Handler.ServeHTTP(rec, req)
	if rec.status != http.StatusOK {
		return rec.statusError()
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("decoding the API's answer to %s %s: %w", method, path, err)
	}
	return nil
}

// recorder is the http.ResponseWriter of an internal request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// statusError turns a recorded error answer (an api.Error body) into a
// *sparkrest.StatusError.
func (r *recorder) statusError() error {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	var e api.Error
	msg := r.body.String()
	if json.Unmarshal(r.body.Bytes(), &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return &sparkrest.StatusError{Status: status, Message: msg, Header: r.header}
}
