package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/drover-project/drover/model"
)

// Code is the stable, machine-readable kind of an error answer, carried in
// Error.Code. Programs branch on the code (or, in Go, on the sentinel error
// it maps to with errors.Is), never on the message or only the HTTP status:
// two refusals with one status (404 for an unknown driver or an unknown
// app) have different codes, and a code never changes its meaning.
type Code string

// Error codes. Each maps to one HTTP status and one sentinel error.
const (
	// CodeInvalidRequest: the request is malformed or asks for something
	// impossible (400).
	CodeInvalidRequest Code = "invalid_request"
	// CodeUnauthenticated: no credential, or one that proves nothing
	// here (401, with a Bearer challenge).
	CodeUnauthenticated Code = "unauthenticated"
	// CodeForbidden: a valid credential without the access this needs, or
	// a wrong token (403).
	CodeForbidden Code = "forbidden"
	// CodeNotFound: no such endpoint, attempt, log or other thing that is
	// not a row of the tables (404).
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed: an endpoint's path with a method it does not
	// take; the Allow header lists those it takes (405, RFC 9110 15.5.6).
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeUnknownDriver, CodeUnknownWorker, CodeUnknownApp and
	// CodeUnknownExecutor: no such row (404).
	CodeUnknownDriver   Code = "unknown_driver"
	CodeUnknownWorker   Code = "unknown_worker"
	CodeUnknownApp      Code = "unknown_app"
	CodeUnknownExecutor Code = "unknown_executor"
	// CodeUnknownNamespace and CodeUnknownToken: no such namespace, no
	// ACL token of that accessor (404).
	CodeUnknownNamespace Code = "unknown_namespace"
	CodeUnknownToken     Code = "unknown_token"
	// CodeTokenInUse: the submission's or registration's token names a
	// driver or app of another namespace; nothing was done (409).
	CodeTokenInUse Code = "token_in_use"
	// CodeNamespaceInUse: the namespace holds drivers or apps that have
	// not ended, so it cannot be deleted (409).
	CodeNamespaceInUse Code = "namespace_in_use"
	// CodeQueueFull: the namespace's waiting drivers are at its
	// --max-queued-drivers; nothing was submitted (429, with
	// Retry-After), as CodeLimitReached.
	CodeQueueFull Code = "queue_full"
	// CodeUnknownSchedule: no schedule of that name (404).
	// CodeScheduleExists: a schedule of that name exists; nothing was
	// created (409). CodeSlotAccounted: the slot was fired, skipped or
	// counted missed already (409). CodeScheduleSuspended: the
	// schedule is suspended, so its slots do not fire (409).
	CodeUnknownSchedule   Code = "unknown_schedule"
	CodeScheduleExists    Code = "schedule_exists"
	CodeSlotAccounted     Code = "slot_accounted"
	CodeScheduleSuspended Code = "schedule_suspended"
	// CodeUnknownBlob: this master's store holds no uploaded file of that
	// SHA-256 (404); another master may.
	CodeUnknownBlob Code = "unknown_blob"
	// CodeDriverEnded and CodeAppEnded: the row is in a final state, so
	// the request cannot apply (409).
	CodeDriverEnded Code = "driver_ended"
	CodeAppEnded    Code = "app_ended"
	// CodeStaleAttempt: a driver attempt or run that is no longer the
	// running one (409).
	CodeStaleAttempt Code = "stale_attempt"
	// CodeConflict: the request clashes with the cluster's state in
	// another way, such as a worker ID in use by another process (409).
	CodeConflict Code = "conflict"
	// CodeNotInPool: a worker registered, but the leader does not see it
	// in its gossip pool, so it could not watch it (409).
	CodeNotInPool Code = "not_in_pool"
	// CodeGone: a log whose worker no longer holds it: the directory of
	// the finished attempt or executor was removed (the worker's
	// cleanup), or the worker is gone from the cluster (410).
	CodeGone Code = "gone"
	// CodeTooLarge: the body exceeds its bound (413).
	CodeTooLarge Code = "too_large"
	// CodeUnsupportedMediaType: a body sent without the Content-Type
	// of what it is: application/json for JSON (415; see CheckJSON),
	// application/x-tar for a snapshot archive (CheckArchive).
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeMisdirected: an open node asked under a host name that is not
	// its own (421; DNS rebinding, see package transport's Gate).
	CodeMisdirected Code = "misdirected_request"
	// CodeTooManyRequests: the caller has too many requests in flight;
	// retry after the Retry-After header's seconds (429).
	CodeTooManyRequests Code = "too_many_requests"
	// CodeLimitReached: the cluster holds as many of something as a
	// bound of the masters allows, for every client or for this one
	// (drivers not yet ended, live apps); the message names the bound's
	// flag. Nothing was done. Unlike CodeTooManyRequests it does not pass
	// when the caller's own requests end, but when what the cluster
	// holds does (429, with Retry-After): a client reports it rather than
	// retrying at once.
	CodeLimitReached Code = "limit_reached"
	// CodeInsufficientStorage: this master's store of uploads would pass
	// its bound in bytes (--max-upload-store) with the file; nothing was
	// stored (507, WebDAV's Insufficient Storage, RFC 4918). The masters'
	// stores hold the same files, so a client reports it rather than
	// trying another.
	CodeInsufficientStorage Code = "insufficient_storage"
	// CodeNoLeader: this master refused the request before it proposed
	// an entry or sent it on, because it is not the ready leader and
	// knows of none it can reach (503). Unlike CodeUnavailable, nothing
	// can have happened: a write that must not be sent twice (a manual
	// run, a schedule's create or delete) may be sent again, to any
	// master. A master of a version without it answers CodeUnavailable.
	CodeNoLeader Code = "no_leader"
	// CodeUnavailable: this master cannot answer with authority now: it
	// is not the leader and cannot reach one, or the quorum did not
	// commit in time. Another master, or a retry, may succeed (503).
	CodeUnavailable Code = "unavailable"
	// CodeBadGateway: the worker that keeps a log could not be reached
	// (502).
	CodeBadGateway Code = "bad_gateway"
	// CodeInternal: a fault of the master (500).
	CodeInternal Code = "internal"
)

// Sentinel errors of the API that are not about a row of the tables (those
// are model's: model.ErrUnknownDriver and the like). Every error a master
// returns wraps exactly one sentinel; CodeOf finds its code.
var (
	ErrInvalidRequest       = errors.New("invalid request")
	ErrUnauthenticated      = errors.New("unauthenticated")
	ErrForbidden            = errors.New("forbidden")
	ErrNotFound             = errors.New("not found")
	ErrMethodNotAllowed     = errors.New("method not allowed")
	ErrConflict             = errors.New("conflict")
	ErrGone                 = errors.New("gone")
	ErrNotInPool            = errors.New("not in the gossip pool")
	ErrUnknownBlob          = errors.New("unknown upload")
	ErrTooLarge             = errors.New("request too large")
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	ErrMisdirected          = errors.New("misdirected request")
	ErrTooManyRequests      = errors.New("too many requests")
	ErrLimitReached         = errors.New("limit reached")
	ErrNoStorage            = errors.New("insufficient storage")
	ErrUnavailable          = model.ErrUnavailable
	ErrBadGateway           = errors.New("worker unreachable")
	ErrInternal             = errors.New("internal error")
)

// ErrNoLeader is ErrUnavailable refused before any work (CodeNoLeader):
// errors.Is(err, ErrUnavailable) holds for it too.
var ErrNoLeader = fmt.Errorf("%w: no leader", ErrUnavailable)

// codes lists each code with its sentinel and HTTP status, in the order
// CodeOf tries them. The precise ones (model's sentinels, and those with
// a status another code shares) come first; the API's own general ones
// stand for a status without a code.
var codes = []struct {
	code   Code
	err    error
	status int
}{
	{CodeUnknownDriver, model.ErrUnknownDriver, http.StatusNotFound},
	{CodeUnknownWorker, model.ErrUnknownWorker, http.StatusNotFound},
	{CodeUnknownApp, model.ErrUnknownApp, http.StatusNotFound},
	{CodeUnknownExecutor, model.ErrUnknownExecutor, http.StatusNotFound},
	{CodeUnknownNamespace, model.ErrUnknownNamespace, http.StatusNotFound},
	{CodeUnknownToken, model.ErrUnknownToken, http.StatusNotFound},
	{CodeNamespaceInUse, model.ErrNamespaceInUse, http.StatusConflict},
	{CodeTokenInUse, model.ErrTokenInUse, http.StatusConflict},
	{CodeQueueFull, model.ErrQueueFull, http.StatusTooManyRequests},
	{CodeUnknownSchedule, model.ErrUnknownSchedule, http.StatusNotFound},
	{CodeScheduleExists, model.ErrScheduleExists, http.StatusConflict},
	{CodeSlotAccounted, model.ErrSlotAccounted, http.StatusConflict},
	{CodeScheduleSuspended, model.ErrScheduleSuspended, http.StatusConflict},
	{CodeDriverEnded, model.ErrDriverEnded, http.StatusConflict},
	{CodeAppEnded, model.ErrAppEnded, http.StatusConflict},
	{CodeStaleAttempt, model.ErrStaleAttempt, http.StatusConflict},
	{CodeNoLeader, ErrNoLeader, http.StatusServiceUnavailable},
	{CodeInvalidRequest, model.ErrInvalidCommand, http.StatusBadRequest},
	{CodeNotInPool, ErrNotInPool, http.StatusConflict},
	{CodeUnknownBlob, ErrUnknownBlob, http.StatusNotFound},
	{CodeLimitReached, ErrLimitReached, http.StatusTooManyRequests},
	{CodeInvalidRequest, ErrInvalidRequest, http.StatusBadRequest},
	{CodeUnauthenticated, ErrUnauthenticated, http.StatusUnauthorized},
	{CodeForbidden, ErrForbidden, http.StatusForbidden},
	{CodeNotFound, ErrNotFound, http.StatusNotFound},
	{CodeMethodNotAllowed, ErrMethodNotAllowed, http.StatusMethodNotAllowed},
	{CodeConflict, ErrConflict, http.StatusConflict},
	{CodeGone, ErrGone, http.StatusGone},
	{CodeTooLarge, ErrTooLarge, http.StatusRequestEntityTooLarge},
	{CodeUnsupportedMediaType, ErrUnsupportedMediaType, http.StatusUnsupportedMediaType},
	{CodeMisdirected, ErrMisdirected, http.StatusMisdirectedRequest},
	{CodeTooManyRequests, ErrTooManyRequests, http.StatusTooManyRequests},
	{CodeInsufficientStorage, ErrNoStorage, http.StatusInsufficientStorage},
	{CodeUnavailable, ErrUnavailable, http.StatusServiceUnavailable},
	{CodeBadGateway, ErrBadGateway, http.StatusBadGateway},
	{CodeInternal, ErrInternal, http.StatusInternalServerError},
}

// apiCodes is where the API's own sentinels start in codes.
const apiCodes = 21

// CodeOf returns the code of err and its HTTP status: the code of the first
// sentinel err wraps, CodeInternal (500) for an error that wraps none.
func CodeOf(err error) (Code, int) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.status
		}
	}
	return CodeInternal, http.StatusInternalServerError
}

// Status returns the HTTP status of code c: the status a refusal with c
// alone would have, and 500 for a code this version does not know.
func (c Code) Status() int {
	for _, k := range codes {
		if k.code == c {
			return k.status
		}
	}
	return http.StatusInternalServerError
}

// ErrorOf returns the Error body that answers err: its message and the
// code CodeOf finds, as a refusal of its own would carry them.
func ErrorOf(err error) *Error {
	code, _ := CodeOf(err)
	return &Error{Error: err.Error(), Code: code}
}

// Err returns e as a Go error that wraps the sentinel of its code and
// reads as e's message, so that errors.Is(err, model.ErrUnknownDriver)
// holds on the far side of HTTP as it did on the master. An unknown or
// empty code (an older or newer master) wraps the sentinel of status
// instead, and ErrInternal when the status names none.
func (e Error) Err(status int) error {
	for _, c := range codes {
		if c.code == e.Code && c.err != model.ErrInvalidCommand {
			return &codedError{msg: e.Error, sentinel: c.err}
		}
	}
	for _, c := range codes[apiCodes:] {
		if c.status == status {
			return &codedError{msg: e.Error, sentinel: c.err}
		}
	}
	return &codedError{msg: e.Error, sentinel: ErrInternal}
}

// codedError is an error answer decoded: its message, wrapping its
// sentinel.
type codedError struct {
	msg      string
	sentinel error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.sentinel }

// Errorf returns an error that wraps sentinel and reads as the formatted
// message alone, without the sentinel's words: for messages that already
// say what is wrong in a user's terms.
func Errorf(sentinel error, format string, args ...any) error {
	return &codedError{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}
