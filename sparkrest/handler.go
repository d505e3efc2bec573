package sparkrest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/model"
)

// Backend is what the handler needs from a master: its own API's decisions,
// reached with the caller's request (its credentials, address and TLS
// state) so that they are the API's own.
type Backend interface {
	// Authorize decides whether r may do what needs access a; it runs
	// before the body is read.
	Authorize(r *http.Request, a auth.Access) error
	// Submit, Driver and Kill are POST /v1/drivers, GET /v1/drivers/{id}
	// and POST /v1/drivers/{id}/kill.
	Submit(r *http.Request, req api.SubmitRequest) (api.SubmitResponse, error)
	Driver(r *http.Request, id string) (*model.Driver, error)
	Kill(r *http.Request, id string) error
	// WorkerHostPort returns a worker's HTTP address, or "" when unknown.
	WorkerHostPort(workerID string) string
}

// StatusError is how a Backend reports an answer of Drover's API other than
// success: its HTTP status and one-line message. Header carries the
// WWW-Authenticate and Retry-After headers of 401 and 429 answers, which
// are passed on.
type StatusError struct {
	Status  int
	Message string
	Header  http.Header
}

func (e *StatusError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }

// Handler serves the protocol. Make one with NewHandler.
type Handler struct {
	backend  Backend
	launcher Launcher
	// newToken makes the submission token of each create request.
	newToken func() string
}

// NewHandler returns a Handler that submits through launcher to backend.
func NewHandler(backend Backend, launcher Launcher) *Handler {
	return &Handler{backend: backend, launcher: launcher, newToken: newToken}
}

// newToken returns a fresh submission token. Spark's create is not
// idempotent (its client may post the same request to each master in turn
// until one accepts it), so each request is a new submission: two equal
// bodies are two drivers, as in Spark.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return "spark-rest-" + hex.EncodeToString(b[:])
}

// ServeHTTP routes as Spark's RestSubmissionServer maps its servlets:
// /v1/submissions/{create,kill,status}[/...], anything else to the error
// answer. Segments are split on "/" with empty ones dropped, and a
// submission ID is the segment after the action (Spark's
// parseSubmissionId), so /status/ID/more asks for ID.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
	parts := segments(r.URL.Path)
	if len(parts) >= 3 && parts[0] == ProtocolVersion && parts[1] == "submissions" {
		id := ""
		if len(parts) > 3 {
			id = parts[3]
		}
		switch parts[2] {
		case "create":
			if h.allowed(w, r, http.MethodPost, auth.Submit) {
				h.create(w, r)
			}
			return
		case "kill":
			if h.allowed(w, r, http.MethodPost, auth.Submit) && hasID(w, id, "kill") {
				h.kill(w, r, id)
			}
			return
		case "status":
			if h.allowed(w, r, http.MethodGet, auth.Read) && hasID(w, id, "status") {
				h.status(w, r, id)
			}
			return
		}
	}
	pathError(w, parts)
}

func segments(path string) []string {
	var out []string
	for _, p := range strings.Split(path, "/") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// allowed answers 405 for another method and the backend's refusal
// otherwise, both before the body is read.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, method string, a auth.Access) bool {
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, method))
		return false
	}
	if err := h.backend.Authorize(r, a); err != nil {
		writeBackendError(w, err)
		return false
	}
	return true
}

func hasID(w http.ResponseWriter, id, action string) bool {
	if id == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("no submission ID in the %s request: use /%s/submissions/%s/ID", action, ProtocolVersion, action))
		return false
	}
	return true
}

// pathError answers a path that names no action, as Spark's ErrorServlet
// does: 468 with highestProtocolVersion when its first segment is another
// protocol version, 400 otherwise.
func pathError(w http.ResponseWriter, parts []string) {
	const use = " Submit requests to /" + ProtocolVersion + "/submissions/create, /kill/ID or /status/ID."
	switch {
	case len(parts) == 0:
		writeError(w, http.StatusBadRequest, "The path names no protocol version."+use)
	case parts[0] != ProtocolVersion:
		e := errorResponse(fmt.Sprintf("Unknown protocol version %q: this server speaks %s.%s", parts[0], ProtocolVersion, use))
		e.HighestProtocolVersion = ProtocolVersion
		writeJSON(w, StatusUnknownProtocolVersion, e)
	case len(parts) == 1 || parts[1] != "submissions":
		// Spark answers /v1/anything-but-submissions as an unknown
		// protocol version "v1" (468), which misleads a client that
		// speaks v1; it is a bad path.
		writeError(w, http.StatusBadRequest, "The path lacks /submissions after /"+ProtocolVersion+"."+use)
	default:
		writeError(w, http.StatusBadRequest, "The path names no action (create, kill or status)."+use)
	}
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, "reading the request: "+err.Error())
		return
	}
	req, unknown, err := decodeCreate(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Malformed request: "+err.Error())
		return
	}
	sub, err := h.translate(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Malformed request: "+err.Error())
		return
	}
	res, err := h.backend.Submit(r, sub)
	out := CreateSubmissionResponse{Action: ActionCreateSubmissionResponse, ServerSparkVersion: ServerSparkVersion, UnknownFields: unknown}
	if err != nil {
		// Spark's client posts to the next master of its URL when one
		// answers success=false, as a standby master does; a master that
		// reaches no leader answers the same way.
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusServiceUnavailable {
			out.Message = backupPrefix + ": " + se.Message
			writeJSON(w, http.StatusOK, out)
			return
		}
		writeBackendError(w, err)
		return
	}
	out.Success = true
	out.SubmissionID = res.DriverID
	out.Message = fmt.Sprintf("Driver %s submitted as %s.", sub.Name, res.DriverID)
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request, id string) {
	out := SubmissionStatusResponse{Action: ActionSubmissionStatusResponse, ServerSparkVersion: ServerSparkVersion, SubmissionID: id}
	d, err := h.backend.Driver(r, id)
	if err != nil {
		// An unknown or malformed ID is success=false, as Spark answers
		// for a driver its master does not know.
		if msg, ok := notFound(err); ok {
			out.Message = msg
			writeJSON(w, http.StatusOK, out)
			return
		}
		writeBackendError(w, err)
		return
	}
	out.Success = true
	out.DriverState = string(d.State)
	out.WorkerID = d.WorkerID
	if out.WorkerID == "" && len(d.Attempts) > 0 {
		// An ended driver keeps naming the worker it ran on, as Spark's
		// does.
		out.WorkerID = d.Attempts[len(d.Attempts)-1].WorkerID
	}
	if out.WorkerID != "" {
		out.WorkerHostPort = h.backend.WorkerHostPort(out.WorkerID)
	}
	// Spark's client logs any message as an error, and Spark sets one only
	// when something went wrong: so only for drivers that ended badly.
	if d.State.Terminal() && d.State != model.DriverFinished {
		out.Message = d.Message
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, id string) {
	out := KillSubmissionResponse{Action: ActionKillSubmissionResponse, ServerSparkVersion: ServerSparkVersion, SubmissionID: id}
	err := h.backend.Kill(r, id)
	if err == nil {
		out.Success = true
		out.Message = fmt.Sprintf("Kill of %s committed.", id)
		writeJSON(w, http.StatusOK, out)
		return
	}
	if msg, ok := notFound(err); ok {
		out.Message = msg
		writeJSON(w, http.StatusOK, out)
		return
	}
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusConflict {
		out.Message = fmt.Sprintf("Driver %s has already ended: %s", id, se.Message)
		writeJSON(w, http.StatusOK, out)
		return
	}
	writeBackendError(w, err)
}

// notFound turns the API's answers for an unknown or malformed driver ID
// (404, 400) and for no reachable leader (503) into the message of a
// success=false answer.
func notFound(err error) (string, bool) {
	var se *StatusError
	if !errors.As(err, &se) {
		return "", false
	}
	switch se.Status {
	case http.StatusNotFound, http.StatusBadRequest:
		return "No such submission: " + se.Message, true
	case http.StatusServiceUnavailable:
		return backupPrefix + ": " + se.Message, true
	}
	return "", false
}

// writeBackendError answers an error of the backend with its status (500
// for one that is no StatusError) as an ErrorResponse.
func writeBackendError(w http.ResponseWriter, err error) {
	var se *StatusError
	if !errors.As(err, &se) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	for _, k := range []string{"WWW-Authenticate", "Retry-After"} {
		if v := se.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	writeError(w, se.Status, se.Message)
}

func errorResponse(msg string) ErrorResponse {
	return ErrorResponse{Action: ActionErrorResponse, Message: msg, ServerSparkVersion: ServerSparkVersion}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse(msg))
}

// writeJSON writes v indented, as Spark's server does; Spark's client
// requires application/json on error answers to read them as messages.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	// Messages quote paths and IDs with < and >; Jackson leaves them be.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decodeCreate parses a create body as Spark's SubmitRestProtocolMessage
// does: one JSON object whose action names the message type. Fields this
// server does not know are accepted and returned, sorted, for the
// response's unknownFields. Values of the wrong type, nulls inside
// appArgs, sparkProperties or environmentVariables, and trailing data are
// errors.
func decodeCreate(body []byte) (CreateSubmissionRequest, []string, error) {
	var req CreateSubmissionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return req, nil, errors.New("the body is empty; want a JSON CreateSubmissionRequest")
		}
		return req, nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, nil, errors.New("trailing data after the JSON object")
	}
	if raw == nil {
		return req, nil, errors.New("the body is null; want a JSON CreateSubmissionRequest")
	}
	a, ok := raw["action"]
	if !ok || string(a) == "null" {
		return req, nil, errors.New("the action field is missing")
	}
	if err := json.Unmarshal(a, &req.Action); err != nil {
		return req, nil, errors.New("the action field is not a string")
	}
	switch {
	case otherActions[req.Action]:
		return req, nil, fmt.Errorf("a %s is not a request this server takes; want a %s", req.Action, ActionCreateSubmissionRequest)
	case req.Action != ActionCreateSubmissionRequest:
		return req, nil, fmt.Errorf("unknown action %q; want %s", req.Action, ActionCreateSubmissionRequest)
	}
	var unknown []string
	for k := range raw {
		if !knownCreateFields[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, f := range []struct {
		name string
		dst  any
	}{
		{"appArgs", &req.AppArgs}, {"appResource", &req.AppResource},
		{"clientSparkVersion", &req.ClientSparkVersion}, {"environmentVariables", &req.EnvironmentVariables},
		{"mainClass", &req.MainClass}, {"message", &req.Message}, {"sparkProperties", &req.SparkProperties},
	} {
		if v, ok := raw[f.name]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return req, nil, fmt.Errorf("field %s: %v", f.name, jsonTypeError(err))
			}
		}
	}
	for i, s := range req.AppArgs {
		if s == nil {
			return req, nil, fmt.Errorf("appArgs[%d] is null", i)
		}
	}
	for _, m := range []struct {
		name string
		m    map[string]*string
	}{{"sparkProperties", req.SparkProperties}, {"environmentVariables", req.EnvironmentVariables}} {
		for k, v := range m.m {
			if v == nil {
				return req, nil, fmt.Errorf("%s[%q] is null", m.name, k)
			}
		}
	}
	return req, unknown, nil
}

// jsonTypeError shortens encoding/json's type errors, which name Go types.
func jsonTypeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "a JSON " + te.Value + " where the protocol wants another type"
	}
	return err.Error()
}
