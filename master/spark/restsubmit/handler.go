package restsubmit

import (
	"bytes"
	"context"
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
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// Backend is what the handler needs of a master: its service (package
// master/service, through Chained), so that every decision is the
// same one the /v1 API makes: access, validation, the per-client bound,
// forwarding to the leader. Errors wrap a sentinel of package api or
// model (api.CodeOf gives the status).
type Backend interface {
	SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error)
	Driver(ctx context.Context, c auth.Caller, id string, r service.Read) (*model.Driver, error)
	KillDriver(ctx context.Context, c auth.Caller, id string) (api.KillResponse, error)
	KillAllDrivers(ctx context.Context, c auth.Caller) (api.KillAllResponse, error)
	ClearCompleted(ctx context.Context, c auth.Caller) (api.ClearCompletedResponse, error)
	Worker(ctx context.Context, c auth.Caller, id string, r service.Read) (*model.Worker, error)
	Health(ctx context.Context) api.Health
}

// Guard is what the handler needs of auth.Guard, which implements it: the
// caller of a request (a credential that proves nothing is an error), and
// whether a caller brought any credential where the masters require one.
type Guard interface {
	Caller(*http.Request) (auth.Caller, error)
	CheckCredential(auth.Identity) error
}

// Handler serves the protocol. Make one with NewHandler.
type Handler struct {
	backend  Backend
	guard    Guard
	launcher Launcher
	// newToken makes the submission token of each create request.
	newToken func() string
}

// NewHandler returns a Handler that submits through launcher to backend,
// with guard establishing each request's caller.
func NewHandler(backend Backend, guard Guard, launcher Launcher) *Handler {
	return &Handler{backend: backend, guard: guard, launcher: launcher, newToken: newToken}
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

// ServeHTTP routes as Spark 4's RestSubmissionServer maps its servlets:
// /v1/submissions/{create,kill,killall,status,clear,readyz}[/...], anything
// else to the error answer. Segments are split on "/" with empty ones
// dropped, and a submission ID is the segment after the action (Spark's
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
			if c, ok := h.allowed(w, r, http.MethodPost); ok {
				h.create(w, r, c)
			}
			return
		case "kill":
			if c, ok := h.allowed(w, r, http.MethodPost); ok && hasID(w, id, "kill") {
				h.kill(w, r, c, id)
			}
			return
		case "killall":
			if c, ok := h.allowed(w, r, http.MethodPost); ok && noBody(w, r, "killall") {
				h.act(w, ActionKillAllSubmissionResponse, func() (string, error) {
					res, err := h.backend.KillAllDrivers(r.Context(), c)
					return fmt.Sprintf("Killed %s that had not ended.", plural.Count(len(res.DriverIDs), "driver")), err
				})
			}
			return
		case "status":
			if c, ok := h.allowed(w, r, http.MethodGet); ok && hasID(w, id, "status") {
				h.status(w, r, c, id)
			}
			return
		case "clear":
			if c, ok := h.allowed(w, r, http.MethodPost); ok && noBody(w, r, "clear") {
				h.act(w, ActionClearResponse, func() (string, error) {
					res, err := h.backend.ClearCompleted(r.Context(), c)
					return fmt.Sprintf("Cleared %s and %s.", plural.Count(len(res.DriverIDs), "finished driver"), plural.Count(len(res.AppIDs), "finished application")), err
				})
			}
			return
		case "readyz":
			// Readiness needs no credential, as a master's /v1/health:
			// a load balancer or an orchestrator's probe asks.
			if methodIs(w, r, http.MethodGet) {
				h.readyz(w, r)
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

// allowed answers 405 for another method, and establishes the caller,
// answering a credential that proves nothing (a wrong token) and, for a
// POST (create, kill, killall, clear: every one a write), the lack of any
// credential where the masters require one; all before the body is read,
// so that nobody without a credential makes a master read a body. What
// the caller may do is the backend's to decide.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, method string) (auth.Caller, bool) {
	if !methodIs(w, r, method) {
		return auth.Caller{}, false
	}
	c, err := h.guard.Caller(r)
	if err == nil && method == http.MethodPost {
		err = h.guard.CheckCredential(c.Identity)
	}
	if err != nil {
		WriteError(w, err)
		return auth.Caller{}, false
	}
	return c, true
}

// methodIs answers 405 naming method when r uses another.
func methodIs(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, method))
		return false
	}
	return true
}

// noBody answers 400 for a request of action that carries a body. Spark's
// client sends none, and Spark ignores one; refused here, a body that a
// caller thought would narrow a kill of every driver (to one submission,
// say) kills nothing.
func noBody(w http.ResponseWriter, r *http.Request, action string) bool {
	var b [1]byte
	if n, _ := r.Body.Read(b[:]); n > 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("A %s request takes no body; it applies to the whole cluster.", action))
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
	const use = " Submit requests to /" + ProtocolVersion + "/submissions/create, /kill/ID, /killall, /status/ID, /clear or /readyz."
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
		writeError(w, http.StatusBadRequest, "The path names no action (create, kill, killall, status, clear or readyz)."+use)
	}
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, c auth.Caller) {
	if err := api.CheckJSON(r.Header); err != nil {
		WriteError(w, err)
		return
	}
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
	res, err := h.backend.SubmitDriver(r.Context(), c, sub)
	out := CreateSubmissionResponse{Action: ActionCreateSubmissionResponse, ServerSparkVersion: ServerSparkVersion, UnknownFields: unknown}
	if err != nil {
		// Spark's client posts to the next master of its URL when one
		// answers success=false, as a standby master does; a master that
		// reaches no leader answers the same way.
		if errors.Is(err, api.ErrUnavailable) {
			out.Message = backupPrefix + ": " + err.Error()
			writeJSON(w, http.StatusOK, out)
			return
		}
		WriteError(w, err)
		return
	}
	out.Success = true
	out.SubmissionID = res.DriverID
	out.Message = fmt.Sprintf("Driver %s submitted as %s.", sub.Name, res.DriverID)
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request, c auth.Caller, id string) {
	out := SubmissionStatusResponse{Action: ActionSubmissionStatusResponse, ServerSparkVersion: ServerSparkVersion, SubmissionID: id}
	d, err := h.backend.Driver(r.Context(), c, id, service.Read{})
	if err != nil {
		// An unknown or malformed ID is success=false, as Spark answers
		// for a driver its master does not know.
		if msg, ok := notFound(err); ok {
			out.Message = msg
			writeJSON(w, http.StatusOK, out)
			return
		}
		WriteError(w, err)
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
		// The address is only shown, and seldom changes: this master's
		// own tables do.
		if wk, err := h.backend.Worker(r.Context(), c, out.WorkerID, service.Read{Stale: true}); err == nil {
			out.WorkerHostPort = wk.HTTPAddr
		}
	}
	// Spark's client logs any message as an error, and Spark sets one only
	// when something went wrong: so only for drivers that ended badly,
	// for those whose staging is failing ("fetching URL: connection
	// refused, try 3, next in 4s"), and for those no ALIVE worker could
	// ever hold (the service says so on read: api.Unplaceable).
	if (d.State.Terminal() && d.State != model.DriverFinished) || d.Staging || api.Unplaceable(d) {
		out.Message = d.Message
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, c auth.Caller, id string) {
	out := KillSubmissionResponse{Action: ActionKillSubmissionResponse, ServerSparkVersion: ServerSparkVersion, SubmissionID: id}
	_, err := h.backend.KillDriver(r.Context(), c, id)
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
	if errors.Is(err, model.ErrDriverEnded) {
		// The refusal's own words repeat what this sentence says; the
		// state, read from the leader, is what the caller lacks.
		out.Message = fmt.Sprintf("Driver %s has already ended.", id)
		if d, err := h.backend.Driver(r.Context(), c, id, service.Read{}); err == nil {
			out.Message = fmt.Sprintf("Driver %s has already ended (%s).", id, d.State)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	WriteError(w, err)
}

// act answers a request on the whole cluster (killall, clear) as a
// Response named action: do's message on success; success=false with
// Spark's backup prefix when no leader can be reached, so that Spark's
// client tries the next master, as it does for kill; and any other refusal
// as an ErrorResponse with its status.
func (h *Handler) act(w http.ResponseWriter, action string, do func() (string, error)) {
	out := Response{Action: action, ServerSparkVersion: ServerSparkVersion}
	msg, err := do()
	switch {
	case errors.Is(err, api.ErrUnavailable):
		out.Message = backupPrefix + ": " + err.Error()
	case err != nil:
		WriteError(w, err)
		return
	default:
		out.Success, out.Message = true, msg
	}
	writeJSON(w, http.StatusOK, out)
}

// readyz answers Spark 4's readiness probe: ready (200, a ReadyzResponse)
// when this master can answer, that is when it knows a live leader that
// is ready (api.CheckLeader); any master can, since followers forward. Not
// ready is 503 with an ErrorResponse, as Spark's ReadyzRequestServlet
// answers, saying why.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	hl := h.backend.Health(r.Context())
	for _, c := range hl.Checks {
		if c.Name != api.CheckLeader {
			continue
		}
		if !c.OK {
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("Master %s is not ready: %s.", hl.ID, c.Message))
			return
		}
		writeJSON(w, http.StatusOK, Response{Action: ActionReadyzResponse, ServerSparkVersion: ServerSparkVersion, Success: true,
			Message: fmt.Sprintf("Master %s is ready: %s.", hl.ID, c.Message)})
		return
	}
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("Master %s is not ready: it reports no leader check.", hl.ID))
}

// notFound turns the refusals for an unknown or malformed driver ID and
// for no reachable leader into the message of a success=false answer.
func notFound(err error) (string, bool) {
	switch code, _ := api.CodeOf(err); code {
	case api.CodeUnknownDriver, api.CodeInvalidRequest:
		return "No such submission: " + err.Error(), true
	case api.CodeUnavailable:
		return backupPrefix + ": " + err.Error(), true
	}
	return "", false
}

// WriteError answers an error of the backend, or a refusal made in front
// of the Handler (transport.Gate), with its code's status (api.CodeOf) as
// an ErrorResponse, with the challenge of a refused credential and the
// Retry-After of a bounded client.
func WriteError(w http.ResponseWriter, err error) {
	code, status := api.CodeOf(err)
	switch code {
	case api.CodeUnauthenticated, api.CodeForbidden:
		auth.Challenge(w.Header(), err)
	case api.CodeTooManyRequests, api.CodeLimitReached:
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, err.Error())
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
