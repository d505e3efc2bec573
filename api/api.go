// Package api defines the JSON bodies of Drover's HTTP API under /v1/, shared
// by masters, workers and clients. Sizes are MiB, times Unix milliseconds.
//
// Endpoints (masters):
//
//	POST /v1/drivers                     SubmitRequest -> 200 SubmitResponse
//	POST /v1/drivers/batch               SubmitBatchRequest -> 200 SubmitBatchResponse
//	GET  /v1/drivers                     ?state=S,..&name=GLOB&worker=W&schedule=NAME -> []model.Driver;
//	                                     with limit=N or cursor=C -> DriverPage (ListQuery)
//	GET  /v1/drivers/{id}                ?index=N&wait=D (a blocking read) -> model.Driver, X-Drover-Index
//	POST /v1/drivers/{id}/kill           -> 200 KillResponse
//	POST /v1/drivers/kill-all            -> 200 KillAllResponse (no body)
//	GET  /v1/drivers/{id}/logs           ?stream=stdout|stderr&offset=N -> bytes
//	POST /v1/workers/register            RegisterWorkerRequest -> RegisterWorkerResponse
//	POST /v1/workers/{id}/heartbeat      HeartbeatRequest -> HeartbeatResponse
//	POST /v1/workers/{id}/decommission   DecommissionWorkerRequest -> RegisterWorkerResponse
//	POST /v1/apps                        RegisterAppRequest -> 200 RegisterAppResponse
//	GET  /v1/apps                        ?state=S,..&name=GLOB&worker=W -> []AppStatus;
//	                                     with limit=N or cursor=C -> AppPage (ListQuery)
//	GET  /v1/apps/{id}                   ?index=N&wait=D -> AppStatus, X-Drover-Index
//	GET  /v1/apps/{id}/watch             If-None-Match: ETAG -> AppStatus with ETag, held while unchanged
//	POST /v1/apps/{id}/executors         RequestExecutorsRequest -> AppStatus
//	POST /v1/apps/{id}/executors/kill    KillExecutorsRequest -> AppStatus
//	POST /v1/apps/{id}/unregister        UnregisterAppRequest -> AppStatus
//	POST /v1/apps/{id}/kill              -> AppStatus
//	GET  /v1/apps/{id}/executors/{eid}/logs ?stream=stdout|stderr&offset=N -> bytes
//	GET  /v1/state                       -> State
//	GET  /v1/events                      ?index=N&kind=K,..&id=ID,.. or Last-Event-ID -> text/event-stream of Event
//	GET  /v1/gossip                      -> GossipPeers
//	GET  /v1/health                      -> Health (200 ok, 503 degraded; no credential needed)
//	POST /v1/operator/clear-completed    -> 200 ClearCompletedResponse (no body; operator access)
//	GET  /v1/namespaces                  -> []NamespaceStatus, by name
//	GET  /v1/namespaces/{name}           -> NamespaceStatus
//	PUT  /v1/namespaces/{name}           NamespaceRequest -> NamespaceStatus (operator access)
//	DELETE /v1/namespaces/{name}         -> model.Namespace, the settings deleted (operator access)
//	POST /v1/acl/tokens                  ACLTokenRequest -> ACLTokenCreated (operator access)
//	GET  /v1/acl/tokens                  -> []model.ACLToken, without hashes (operator access)
//	DELETE /v1/acl/tokens/{accessor}     -> model.ACLToken, the token revoked (operator access)
//	POST /v1/schedules                   ScheduleRequest -> 201 ScheduleStatus
//	GET  /v1/schedules                   ?namespace=N or all_namespaces=true -> ScheduleList
//	GET  /v1/schedules/{name}            -> ScheduleStatus
//	POST /v1/schedules/{name}/suspend    -> ScheduleStatus
//	POST /v1/schedules/{name}/resume     -> ScheduleStatus
//	POST /v1/schedules/{name}/run        -> 201 ScheduleRunResponse
//	DELETE /v1/schedules/{name}          -> model.Schedule, the row deleted
//	PUT  /v1/blobs/{sha256}              the file as the body -> UploadResponse (any master; see below)
//	GET  /v1/blobs/{sha256}              -> the file (HEAD: its size); Range requests too
//
// An upload goes to any master, not only the leader: the master stores the
// file, pushes it to the other voters and answers once a majority of the
// voters hold it (503 naming how many do otherwise). A file held already
// is not sent again when the request carries Expect: 100-continue.
//
// A watch is an application client's long poll, and its sign of life: the
// leader answers at once when the app's status differs from the ETag the
// client last saw, or else after a few seconds with the same status. An app
// nobody watches for the leader's --app-timeout is ended FAILED.
//
// Each JSON endpoint above is declared once as an Endpoint (V1SubmitDriver,
// ...), which the client calls and a master routes, admits and forwards
// (package master/service describes the master's side).
//
// Reads are linearizable (answered by the leader after it confirms its
// leadership) unless the query has stale=true, which lets any master answer
// from its own tables. Errors are an Error body with a 4xx or 5xx status
// and a Code.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/drover-project/drover/model"
)

// MaxBodyBytes bounds every request body; larger ones get 413.
const MaxBodyBytes = 1 << 20

// Route is a /v1 endpoint's method and path as net/http's ServeMux takes
// a pattern: "{id}" stands for the row the path names.
type Route struct {
	Method, Pattern string
}

// String is the route as a ServeMux pattern, "POST /v1/apps/{id}/kill".
func (r Route) String() string { return r.Method + " " + r.Pattern }

// Path is the route's path naming row id, path-escaped; a route that names
// no row is its pattern.
func (r Route) Path(id string) string {
	return strings.Replace(r.Pattern, "{id}", url.PathEscape(id), 1)
}

// NoBody is the body of a request that takes none.
type NoBody struct{}

// Endpoint is a /v1 endpoint whose request body is the JSON of In (NoBody
// for none) and whose answer is the JSON of Out: what the client sends,
// what a master decodes, and what a follower forwards to the leader, all
// from the one declaration below. The master's side (access, who answers,
// per-client bound, handler) is in package master/service.
type Endpoint[In, Out any] struct{ Route }

// The JSON endpoints, as the table at the top of this package lists them.
var (
	V1SubmitDriver       = Endpoint[SubmitRequest, SubmitResponse]{Route{http.MethodPost, PathDrivers}}
	V1SubmitDrivers      = Endpoint[SubmitBatchRequest, SubmitBatchResponse]{Route{http.MethodPost, PathSubmitBatch}}
	V1Drivers            = Endpoint[NoBody, DriverPage]{Route{http.MethodGet, PathDrivers}}
	V1Driver             = Endpoint[NoBody, *model.Driver]{Route{http.MethodGet, PathDrivers + "/{id}"}}
	V1KillDriver         = Endpoint[NoBody, KillResponse]{Route{http.MethodPost, PathDrivers + "/{id}/kill"}}
	V1KillAllDrivers     = Endpoint[NoBody, KillAllResponse]{Route{http.MethodPost, PathKillAllDrivers}}
	V1RegisterWorker     = Endpoint[RegisterWorkerRequest, RegisterWorkerResponse]{Route{http.MethodPost, PathRegisterWorker}}
	V1Heartbeat          = Endpoint[HeartbeatRequest, HeartbeatResponse]{Route{http.MethodPost, "/v1/workers/{id}/heartbeat"}}
	V1DecommissionWorker = Endpoint[DecommissionWorkerRequest, RegisterWorkerResponse]{Route{http.MethodPost, "/v1/workers/{id}/decommission"}}
	V1RegisterApp        = Endpoint[RegisterAppRequest, RegisterAppResponse]{Route{http.MethodPost, PathApps}}
	V1Apps               = Endpoint[NoBody, AppPage]{Route{http.MethodGet, PathApps}}
	V1App                = Endpoint[NoBody, AppStatus]{Route{http.MethodGet, PathApps + "/{id}"}}
	V1RequestExecutors   = Endpoint[RequestExecutorsRequest, AppStatus]{Route{http.MethodPost, PathApps + "/{id}/executors"}}
	V1KillExecutors      = Endpoint[KillExecutorsRequest, AppStatus]{Route{http.MethodPost, PathApps + "/{id}/executors/kill"}}
	V1UnregisterApp      = Endpoint[UnregisterAppRequest, AppStatus]{Route{http.MethodPost, PathApps + "/{id}/unregister"}}
	V1KillApp            = Endpoint[NoBody, AppStatus]{Route{http.MethodPost, PathApps + "/{id}/kill"}}
	V1State              = Endpoint[NoBody, State]{Route{http.MethodGet, PathState}}
	V1GossipPeers        = Endpoint[NoBody, GossipPeers]{Route{http.MethodGet, "/v1/gossip"}}
	V1Health             = Endpoint[NoBody, Health]{Route{http.MethodGet, "/v1/health"}}
	V1RaftPeers          = Endpoint[NoBody, RaftPeers]{Route{http.MethodGet, PathRaftPeers}}
	V1AddVoter           = Endpoint[AddVoterRequest, RaftPeers]{Route{http.MethodPost, PathAddVoter}}
	V1RemovePeer         = Endpoint[RemovePeerRequest, RaftPeers]{Route{http.MethodPost, PathRemovePeer}}
	V1TransferLeadership = Endpoint[TransferLeadershipRequest, TransferLeadershipResponse]{Route{http.MethodPost, PathTransferLeadership}}
	V1ClearCompleted     = Endpoint[NoBody, ClearCompletedResponse]{Route{http.MethodPost, PathClearCompleted}}
	V1Namespaces         = Endpoint[NoBody, []NamespaceStatus]{Route{http.MethodGet, PathNamespaces}}
	V1Namespace          = Endpoint[NoBody, NamespaceStatus]{Route{http.MethodGet, PathNamespaces + "/{id}"}}
	V1ApplyNamespace     = Endpoint[NamespaceRequest, NamespaceStatus]{Route{http.MethodPut, PathNamespaces + "/{id}"}}
	V1DeleteNamespace    = Endpoint[NoBody, *model.Namespace]{Route{http.MethodDelete, PathNamespaces + "/{id}"}}
	V1CreateACLToken     = Endpoint[ACLTokenRequest, ACLTokenCreated]{Route{http.MethodPost, PathACLTokens}}
	V1ACLTokens          = Endpoint[NoBody, []*model.ACLToken]{Route{http.MethodGet, PathACLTokens}}
	V1RevokeACLToken     = Endpoint[NoBody, *model.ACLToken]{Route{http.MethodDelete, PathACLTokens + "/{id}"}}
)

// The endpoints whose bodies or answers are not JSON: streams, logs,
// uploads and snapshots, each written by hand on both sides.
var (
	V1DriverLogs      = Route{http.MethodGet, PathDrivers + "/{id}/logs"}
	V1ExecutorLogs    = Route{http.MethodGet, PathApps + "/{id}/executors/{eid}/logs"}
	V1WatchApp        = Route{http.MethodGet, PathApps + "/{id}/watch"}
	V1Events          = Route{http.MethodGet, "/v1/events"}
	V1SaveSnapshot    = Route{http.MethodGet, PathSnapshot}
	V1RestoreSnapshot = Route{http.MethodPost, PathSnapshot}
	V1Upload          = Route{http.MethodPut, PathBlobs + "/{id}"}
	V1Blob            = Route{http.MethodGet, PathBlobs + "/{id}"}
)

// Headers that masters set or read.
const (
	// HeaderLeader carries the leader's HTTP address, when known, on every
	// master response.
	HeaderLeader = "X-Drover-Leader"
	// HeaderForwarded marks a request a follower forwarded to the leader, so
	// it is never forwarded twice, and names that follower. It counts only
	// from an authenticated master (auth.Guard.Caller).
	HeaderForwarded = "X-Drover-Forwarded"
	// HeaderClient carries, on a forwarded request, the IP address of the
	// client at the master its request reached first: the leader counts
	// the client's drivers under it. It is honoured only beside
	// HeaderForwarded, from a master.
	HeaderClient = "X-Drover-Client"
	// HeaderServedBy names the master that produced the answer.
	HeaderServedBy = "X-Drover-Served-By"
	// HeaderMasterCredential carries the credential a master presents to
	// the other masters when the cluster runs without TLS, derived from
	// their shared raft key (pki.RaftKey.Credential). It proves a master
	// as a master certificate does with TLS, beside the Authorization of
	// the caller a forwarded request acts for.
	HeaderMasterCredential = "X-Drover-Master-Credential"
	// HeaderForwardedCert names, on a forwarded request, the node the
	// original caller's certificate named, as pki.NodeURI writes it
	// ("drover://worker/w1", or "drover://worker" for a certificate that
	// names no node), so that the leader holds a worker to its own ID
	// however the request reached it. It is honoured only beside
	// HeaderForwarded from a master certificate (TLS); a forwarded
	// request without it is the forwarding master's own, as older
	// masters forwarded.
	HeaderForwardedCert = "X-Drover-Forwarded-Cert"
)

// Error is the body of every error response: one line fit to show a user,
// and the stable code of its kind.
type Error struct {
	Error string `json:"error"`
	// Code says what kind of refusal this is; see Code. Empty only from
	// masters older than codes.
	Code Code `json:"code,omitempty"`
	// Leader is the leader's HTTP address, when known, on 503 answers
	// from a master that could not reach it.
	Leader string `json:"leader,omitempty"`
}

// SubmitRequest asks for a new driver. Token is the client's submission token:
// a retry with the same token yields the same driver, never a second one.
type SubmitRequest struct {
	Token string `json:"token"`
	Name  string `json:"name,omitempty"`
	// DriverSpec is the program and what each attempt of it needs; see
	// model.DriverSpec for each field.
	model.DriverSpec
}

// ReasonUnplaceable starts the message of a waiting driver that no ALIVE
// worker could hold even when idle (Spark's "requires more resources than
// any of our workers have"). Such a driver stays queued until a larger
// worker registers; `submit` reports it and exits 3.
const ReasonUnplaceable = "requires more resources than any worker has"

// Unplaceable reports whether d, as a master answers it (its message set
// on read), waits for a worker larger than any ALIVE one.
func Unplaceable(d *model.Driver) bool {
	return d.WorkerID == "" && !d.State.Terminal() && strings.Contains(d.Message, ReasonUnplaceable)
}

// The reasons a namespace gives for holding a waiting driver back, as the
// start of its message on read (master/service words them with these,
// then the figures): its quota reached ("namespace etl is at its cores
// quota (8 of 8)") or its driver share ("driver share of etl reached (4
// of 4 cores)"). Unlike the workers' reasons, these lift only as the
// namespace's own work ends or an operator raises the bound, so submit
// reports them at once and returns (HeldByNamespace), as Nomad's job run
// reports a blocked evaluation's placement failures.
const (
	ReasonQuota       = "namespace %s is at its %s quota"
	ReasonDriverShare = "driver share of %s reached"
)

// heldByNamespace matches the start of a message worded with ReasonQuota
// (a bound may be several words: "running drivers") or
// ReasonDriverShare.
var heldByNamespace = regexp.MustCompile(`^(namespace \S+ is at its .+ quota \(|driver share of \S+ reached)`)

// HeldByNamespace reports whether d, as a master answers it (its message
// set on read), waits because its namespace's quota or driver share is
// reached (ReasonQuota, ReasonDriverShare).
func HeldByNamespace(d *model.Driver) bool {
	return d.WorkerID == "" && !d.State.Terminal() && heldByNamespace.MatchString(d.Message)
}

// MaxTokenLen bounds a submission token, in bytes.
const MaxTokenLen = 128

// SubmitResponse is the answer to a submission.
type SubmitResponse struct {
	DriverID string `json:"driver_id"`
	// Existing is true when the token was already known: no new driver.
	Existing bool `json:"existing"`
}

// MaxBatchSubmissions bounds the submissions of one SubmitBatchRequest.
const MaxBatchSubmissions = 1024

// SubmitBatchRequest is several submissions in one request: each is
// checked, committed and answered as a SubmitRequest of its own would be
// (its own token, its own driver or refusal), but they share the request
// and, on the leader, the Raft entries of the submissions committed with
// them. An orchestrator with many drivers to submit, or a client with
// many submissions in flight (the Go client gathers them), sends fewer
// requests so. A token given twice names one submission, as it does
// across requests: the second yields the first's driver, Existing, and
// its program is not looked at.
//
// Each submission takes one of the client's slots of submissions in
// flight on the master it reaches (--max-submits-per-client): those
// beyond the free slots are answered CodeTooManyRequests in place, and
// those and any answered CodeUnavailable are the ones to send again. A
// program past --max-program-size is answered CodeTooLarge, and a
// submission past --max-live-drivers or --max-live-drivers-per-client
// CodeLimitReached, in place, each as it would be alone. A
// batch sent again whole moves on too: when slots are short, a submission
// that is refused on its own, whose token the master holds committed, or
// whose token came earlier in the batch needs none, though a batch always
// needs one. A batch is refused whole when it is empty,
// holds more than MaxBatchSubmissions or exceeds MaxBodyBytes (400, 413),
// comes without a credential or the access to submit (401, 403), finds
// no slot free (429), or reaches a master that is not the leader and
// cannot reach it (503).
type SubmitBatchRequest struct {
	Submissions []SubmitRequest `json:"submissions"`
}

// SubmitBatchResponse answers a SubmitBatchRequest: one result for each
// submission, in the order of the request.
type SubmitBatchResponse struct {
	Results []SubmitResult `json:"results"`
}

// SubmitResult is what became of one submission of a batch: the
// SubmitResponse a request of its own would have had, or the Error it
// would have been refused with. An Error with CodeUnavailable or
// CodeTooManyRequests says the submission may or may not have been
// committed, as a 503 or 429 would: retry it with the same token.
type SubmitResult struct {
	SubmitResponse
	Error *Error `json:"error,omitempty"`
}

// KillResponse is the answer to a kill.
type KillResponse struct {
	DriverID string `json:"driver_id"`
}

// KillAllResponse answers a kill of every driver that has not ended
// (Spark's RequestKillAllDrivers): DriverIDs are the drivers it killed,
// ordered by ID; a driver that ended meanwhile is not among them. Killing
// all again kills what was submitted since, so a retry does no harm.
type KillAllResponse struct {
	DriverIDs []string `json:"driver_ids"`
}

// ClearCompletedResponse answers a clear of the finished drivers and apps
// (Spark's RequestClearCompletedDriversAndApps): the rows it dropped,
// oldest first. Their submission tokens go with them, as under retention.
type ClearCompletedResponse struct {
	DriverIDs []string `json:"driver_ids"`
	AppIDs    []string `json:"app_ids"`
}

// RegisterWorkerRequest registers a worker, or re-registers a known one
// (after a restart, or after it was declared lost).
type RegisterWorkerRequest struct {
	ID string `json:"id"`
	// Instance names the worker's work dir (a random ID kept there): a
	// second process claiming the same worker ID from another work dir is
	// refused while the first is alive, so no attempt runs on both.
	Instance string `json:"instance"`
	HTTPAddr string `json:"http_addr"`
	Cores    int    `json:"cores"`
	MemoryMB int64  `json:"memory_mb"`
	// Resources are the custom resources the worker offers, each name
	// with its addresses ({"gpu": ["0", "1"]}; Spark's
	// spark.worker.resource.*).
	Resources model.Resources `json:"resources,omitempty"`
}

// RegisterWorkerResponse confirms a registration.
type RegisterWorkerResponse struct {
	WorkerID string `json:"worker_id"`
}

// DecommissionWorkerRequest tells the leader a worker is shutting down on
// purpose, after it has killed its attempts; the answer is a
// RegisterWorkerResponse naming the worker.
type DecommissionWorkerRequest struct {
	Instance string `json:"instance"`
	Reason   string `json:"reason,omitempty"`
}

// HeartbeatRequest is a worker's periodic sync with the leader. Reports
// carries state changes of its attempts that the leader has not yet
// acknowledged; Running lists every attempt it runs now.
type HeartbeatRequest struct {
	// Instance must match the registered one; otherwise the answer is
	// Registered=false and the reports are ignored.
	Instance string                `json:"instance"`
	Reports  []model.AttemptReport `json:"reports"`
	Running  []AttemptRef          `json:"running"`
	// ExecutorReports and RunningExecutors are Reports and Running for
	// the worker's executors.
	ExecutorReports  []model.ExecutorReport `json:"executor_reports,omitempty"`
	RunningExecutors []ExecutorRef          `json:"running_executors,omitempty"`
	// WaitIndex, when non-zero, asks the leader to hold the answer (up to
	// a few seconds) until its tables have moved past this Raft index, so
	// new assignments reach the worker without polling delay.
	WaitIndex uint64 `json:"wait_index,omitempty"`
	// Brief asks for a brief answer: the attempts and executors of the
	// desired set that Running and RunningExecutors name come back named
	// only, in Kept and KeptExecutors, since the worker holds what it
	// launched them with. Without it every unit comes in full on every
	// answer, and a worker with a hundred drivers receives all hundred
	// programs each time one more is placed. A master that does not know
	// the field answers in full, which a worker asking must take too.
	Brief bool `json:"brief,omitempty"`
	// Preempting names the units of Running and RunningExecutors whose
	// preemption notice (HeartbeatResponse.Preempt) the worker has acted
	// on, with the namespace each was preempted for: a long poll returns
	// when the leader's notices for the worker differ from them.
	Preempting []model.Preemption `json:"preempting,omitempty"`
}

// PreemptNotice tells a worker that a unit of its desired set is
// preempted for namespace By (model.PreemptAttempts): it sends the
// program SIGTERM at once and kills it at Deadline (Unix ms, the
// leader's clock), keeping the unit's cores until it ends.
type PreemptNotice struct {
	model.Preemption
	Deadline int64 `json:"deadline"`
}

// AttemptRef names one attempt of one driver (model.AttemptRef, which the
// tables hand out).
type AttemptRef = model.AttemptRef

// ExecutorRef names one executor of one application.
type ExecutorRef struct {
	AppID      string `json:"app_id"`
	ExecutorID int    `json:"executor_id"`
}

// HeartbeatResponse tells a worker what it should run. Assignments is the
// whole desired set: the worker starts what is missing and kills every
// attempt it runs that is not in it (killed, or superseded by a relaunch).
type HeartbeatResponse struct {
	// Registered is false when the leader does not know the worker as
	// ALIVE; the worker must register again, and runs nothing meanwhile
	// that is not in Assignments.
	Registered  bool         `json:"registered"`
	Assignments []Assignment `json:"assignments"`
	// Executors is the whole desired set of executors, as Assignments is
	// for driver attempts.
	Executors []ExecutorAssignment `json:"executors"`
	// Acked lists the reports that were committed; the worker drops them.
	Acked []model.AttemptReport `json:"acked"`
	// AckedExecutors is Acked for executor reports.
	AckedExecutors []model.ExecutorReport `json:"acked_executors,omitempty"`
	// Index is the leader's applied Raft index when it answered.
	Index uint64 `json:"index"`
	// Kept and KeptExecutors are, in an answer to a Brief request, the
	// attempts and executors of the desired set that the request said
	// the worker runs, named only: the desired set is Assignments and
	// Kept together, Executors and KeptExecutors together.
	Kept          []AttemptRef  `json:"kept,omitempty"`
	KeptExecutors []ExecutorRef `json:"kept_executors,omitempty"`
	// Preempt lists the units of the desired set under a preemption
	// notice, on every answer until they end. A master that does not
	// know the field sends none.
	Preempt []PreemptNotice `json:"preempt,omitempty"`
}

// Assignment is one attempt a worker should run, with what it needs to
// launch it.
type Assignment struct {
	DriverID  string            `json:"driver_id"`
	Attempt   int               `json:"attempt"`
	Argv      []string          `json:"argv"`
	Env       map[string]string `json:"env,omitempty"`
	Cores     int               `json:"cores"`
	MemoryMB  int64             `json:"memory_mb"`
	Supervise bool              `json:"supervise"`
	// Artifacts are what the worker stages before it starts the program.
	Artifacts []model.Artifact `json:"artifacts,omitempty"`
	// Token is the attempt's own API token (package auth's DriverToken),
	// which the worker hands the driver as DROVER_TOKEN so that it can
	// register its application; "" when the masters use no tokens.
	// Derived by the leader on each answer, never stored in the tables.
	Token string `json:"token,omitempty"`
	// Resources are the worker's addresses this attempt holds.
	Resources model.Resources `json:"resources,omitempty"`
	// MaxRestarts, RestartWindowMS and RescheduleAfter are the driver's
	// restart bounds (SubmitRequest's); Failures are the ends (Unix ms)
	// of the failed runs of its earlier attempts that the bounds still
	// count, oldest first, so that a relaunch elsewhere goes on counting.
	MaxRestarts     int     `json:"max_restarts,omitempty"`
	RestartWindowMS int64   `json:"restart_window_ms,omitempty"`
	RescheduleAfter int     `json:"reschedule_after,omitempty"`
	Failures        []int64 `json:"failures,omitempty"`
	// User is the driver's user (SubmitRequest's), the same for every
	// attempt: "" runs the program as the worker's default user.
	User string `json:"user,omitempty"`
}

// ExecutorAssignment is one executor a worker should run, with what it
// needs to launch it: the app's argv and environment, and the executor's
// share of cores and memory (MiB).
type ExecutorAssignment struct {
	AppID      string            `json:"app_id"`
	ExecutorID int               `json:"executor_id"`
	Argv       []string          `json:"argv"`
	Env        map[string]string `json:"env,omitempty"`
	Cores      int               `json:"cores"`
	MemoryMB   int64             `json:"memory_mb"`
	// Artifacts are the app's, staged before the executor starts.
	Artifacts []model.Artifact `json:"artifacts,omitempty"`
	// Resources are the worker's addresses the executor holds.
	Resources model.Resources `json:"resources,omitempty"`
	// User is the app's user (model.App's): "" runs the executor as the
	// worker's default user.
	User string `json:"user,omitempty"`
}

// RegisterAppRequest registers an application (Spark's
// RegisterApplication). Token makes a retry yield the same app. DriverID
// and DriverAttempt tie the app to the driver attempt that registers it
// (they come from DROVER_DRIVER_ID and DROVER_ATTEMPT), and DriverRun to the
// run of that attempt (DROVER_RUN); when that attempt or run ends, the app
// ends. Executors is the initial executor limit, 0 for none;
// MaxCores caps the app's cores, 0 for no cap (Spark's spark.cores.max).
type RegisterAppRequest struct {
	Token         string `json:"token"`
	Name          string `json:"name,omitempty"`
	DriverID      string `json:"driver_id,omitempty"`
	DriverAttempt int    `json:"driver_attempt,omitempty"`
	DriverRun     int    `json:"driver_run,omitempty"`
	// Namespace is the app's namespace when it has no driver ("" for
	// model.DefaultNamespace, or for a namespace token the one its
	// token picks); an app with a driver is its driver's, whatever
	// this says.
	Namespace           string            `json:"namespace,omitempty"`
	MaxCores            int               `json:"max_cores"`
	CoresPerExecutor    int               `json:"cores_per_executor"`
	MemoryPerExecutorMB int64             `json:"memory_per_executor_mb"`
	Executors           int               `json:"executors"`
	Argv                []string          `json:"argv"`
	Env                 map[string]string `json:"env,omitempty"`
	// Artifacts are staged into each executor's directory, as a
	// submission's are into each attempt's.
	Artifacts []model.Artifact `json:"artifacts,omitempty"`
	// DriverArtifacts gives the executors the artifacts of the driver
	// DriverID too, first: a driver shipped with --upload or --artifact
	// runs its executors from the same files, as Spark's executors fetch
	// the application's jars.
	DriverArtifacts bool `json:"driver_artifacts,omitempty"`
	// ExecutorResources are the custom resources each executor needs, by
	// name (Spark's spark.executor.resource.{name}.amount), placed as a
	// driver's Resources are.
	ExecutorResources model.ResourceAmounts `json:"executor_resources,omitempty"`
	// User is the user the executors run as, of SubmitRequest.User's
	// form. Left empty, an app tied to a driver (DriverID) takes that
	// driver's user, and any other runs its executors as each worker's
	// default user. A driver token may name only its own driver's user
	// (403 otherwise): a driver cannot reach another user through its
	// executors; a submit or operator token may name any.
	User string `json:"user,omitempty"`
}

// RegisterAppResponse is the answer to a registration.
type RegisterAppResponse struct {
	AppID string `json:"app_id"`
	// Existing is true when the token was already known: no new app.
	Existing bool `json:"existing"`
}

// AppStatus is an application with its executors, oldest first.
type AppStatus struct {
	*model.App
	Executors []*model.Executor `json:"executors"`
}

// RequestExecutorsRequest sets an app's executor limit to Total (Spark's
// requestTotalExecutors).
type RequestExecutorsRequest struct {
	Total int `json:"total"`
}

// KillExecutorsRequest kills executors of an app; they are not replaced.
type KillExecutorsRequest struct {
	ExecutorIDs []int `json:"executor_ids"`
}

// UnregisterAppRequest ends an app from its own client: State is FINISHED
// (the default) or FAILED.
type UnregisterAppRequest struct {
	State   model.ApplicationState `json:"state,omitempty"`
	Message string                 `json:"message,omitempty"`
}

// Master describes one Raft voter in State.
type Master struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// Alive is true when the master that answers sees this one in its
	// gossip pool, which drops a master that stopped answering within a
	// second or so (itself is always alive).
	Alive bool `json:"alive"`
}

// State is the JSON view of the cluster that /v1/state serves.
type State struct {
	ID             string          `json:"id"`
	Role           string          `json:"role"`
	Leader         string          `json:"leader"`
	LeaderHTTP     string          `json:"leader_http,omitempty"`
	Term           uint64          `json:"term"`
	CommitIndex    uint64          `json:"commit_index"`
	AppliedIndex   uint64          `json:"applied_index"`
	Masters        []Master        `json:"masters"`
	Workers        []*model.Worker `json:"workers"`
	Drivers        []*model.Driver `json:"drivers"`
	WaitingDrivers []string        `json:"waiting_drivers"`
	Apps           []AppStatus     `json:"apps"`
	// StateHash is the digest of this master's tables as of StateIndex:
	// two masters whose StateIndex is equal hold equal tables exactly
	// when their hashes are equal.
	StateHash string `json:"state_hash"`
	// StateIndex is the Raft index of the last entry StateHash's tables
	// include, read with it. AppliedIndex, Raft's, may run ahead of the
	// tables by the entries being applied.
	StateIndex uint64 `json:"state_index"`
	// PoolSplit, on the leader, lists the voters and the workers it hears
	// from (Raft, heartbeats) but does not see in its gossip pool: a split
	// pool, which leaves workers unwatched and followers unable to find
	// the leader.
	PoolSplit []PoolMember `json:"pool_split,omitempty"`
	// LeadingSince, on the ready leader, is when it became so (Unix
	// milliseconds): its election, then the Barrier that applied every
	// earlier entry.
	LeadingSince int64 `json:"leading_since,omitempty"`
	// Blobs is this master's store of uploaded files.
	Blobs BlobUsage `json:"blobs"`
}

// BlobUsage is the size of one master's store of uploaded files.
type BlobUsage struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// UploadResponse answers PUT /v1/blobs/SHA256: the file is stored under
// its digest, and Held names the voters known to hold it when the answer
// was made (the master that answered first), at least a majority of the
// Voters of the Raft configuration. A master answering another master's
// push names only itself, with Voters 0.
type UploadResponse struct {
	SHA256 string   `json:"sha256"`
	Size   int64    `json:"size"`
	Held   []string `json:"held"`
	Voters int      `json:"voters"`
}

// RaftPeers answers GET /v1/operator/raft/peers: the Raft configuration as
// this master sees it (Consul's "operator raft list-peers"), at the index
// of the configuration entry.
type RaftPeers struct {
	Index uint64   `json:"index"`
	Peers []Master `json:"peers"`
}

// AddVoterRequest adds a master as a Raft voter (raft.AddVoter): ID is its
// --id, Address its host:raft-port. The master must be running without
// --peers so that it waits to be added instead of bootstrapping.
type AddVoterRequest struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// RemovePeerRequest removes a master from the Raft configuration
// (raft.RemoveServer), alive or dead. Removing one that is not there is a
// no-op, so a retried or duplicated request does no harm.
type RemovePeerRequest struct {
	ID string `json:"id"`
}

// TransferLeadershipRequest asks the leader to hand leadership over
// (raft.LeadershipTransfer): to ID when given, else to the most up-to-date
// voter. From, when given, is the leader the caller saw: if another master
// leads by the time the request arrives, the transfer is taken as done, so
// that the copies a fanning-out client sends hand over once, not once each.
type TransferLeadershipRequest struct {
	ID   string `json:"id,omitempty"`
	From string `json:"from,omitempty"`
}

// TransferLeadershipResponse names the leader after a transfer.
type TransferLeadershipResponse struct {
	Leader string `json:"leader"`
}

// MaxSnapshotBytes bounds a snapshot uploaded for restore.
const MaxSnapshotBytes = 4 << 30

// GossipPeers answers GET /v1/gossip: the gossip addresses of the masters
// this master knows, itself first, so a worker (or a master) given only
// the masters' API addresses can join their pool.
type GossipPeers struct {
	Masters []PoolMember `json:"masters"`
}

// PoolMember names one member of the gossip pool: its role (master or
// worker), ID and gossip address, and, in a report of a split pool, since
// when the leader has missed it (Unix milliseconds).
type PoolMember struct {
	Role   string `json:"role"`
	ID     string `json:"id"`
	Gossip string `json:"gossip,omitempty"`
	Since  int64  `json:"since,omitempty"`
}

// Health answers GET /v1/health, for load balancers and service managers:
// Status is "ok" (HTTP 200) when every check passes, "degraded" (503)
// otherwise.
type Health struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Leader is the leader this master's Raft names, live or not ("" for
	// none): its own ID on the leader, so that a client told of a
	// leader by a follower can ask that master to confirm it.
	Leader string  `json:"leader,omitempty"`
	Checks []Check `json:"checks"`
}

// Check is one health check, named by one of CheckLeader, CheckQuorum and
// CheckPool.
type Check struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// EventKind is what an Event is about (model.EventKind).
type EventKind = model.EventKind

// Event kinds, one per table.
const (
	EventDriver   = model.EventDriver
	EventApp      = model.EventApp
	EventExecutor = model.EventExecutor
	EventWorker   = model.EventWorker
	EventSchedule = model.EventSchedule
)

// Event ops (model's): a row was added or changed (upsert) or dropped
// (delete), or, on a stream that resumes from an index older than the
// master still holds, reset.
const (
	OpUpsert = model.OpUpsert
	OpDelete = model.OpDelete
	OpReset  = model.OpReset
)

// Event is one change of one row, as GET /v1/events streams it
// (model.Event, which the FSM makes).
type Event = model.Event

// HeaderIndex carries, on an answer to a read, the Raft index the answer
// reflects: a blocking read sends it back as ?index= to wait for the next
// change (Nomad's X-Nomad-Index).
const HeaderIndex = "X-Drover-Index"

// The checks of a Health answer.
const (
	// CheckLeader: a live leader is known, so this master can answer
	// (itself or through the leader): this master as the ready leader,
	// or one a follower heard from within three quarters of Raft's
	// heartbeat timeout.
	CheckLeader = "leader"
	// CheckQuorum: this master hears from a quorum: as leader, a quorum
	// confirms it; as follower, the leader spoke within an election
	// timeout or two.
	CheckQuorum = "quorum"
	// CheckPool: every voter is in this master's gossip pool.
	CheckPool = "pool"
)

// Marshal encodes a request body as JSON, as a client or a forwarding
// master sends it: without encoding/json's escapes of <, > and &, which
// are for JSON inside HTML. Bodies carry programs' arguments and
// environments, where those characters are common, and a body escaped
// sixfold on its way to the leader could exceed MaxBodyBytes there after
// it fit the bound of the master it reached first.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON decodes a batch as strictly as every body a master reads
// (an unknown field is refused) and stops at the first submission past
// MaxBatchSubmissions, so that a body of a million empty submissions
// costs a master no more than a batch it would take.
func (b *SubmitBatchRequest) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t == nil {
		return err // null leaves b as it is, as encoding/json would
	} else if s, ok := t.(string); ok {
		// Quoted: a string may hold line breaks, and an error is one line.
		return fmt.Errorf("a batch is an object, not the string %q", s)
	} else if t != json.Delim('{') {
		return fmt.Errorf("a batch is an object, not %v", t)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		if k, _ := key.(string); !strings.EqualFold(k, "submissions") {
			return fmt.Errorf("json: unknown field %q", key)
		}
		t, err := dec.Token()
		if err != nil {
			return err
		}
		b.Submissions = nil
		if t == nil {
			continue
		}
		if t != json.Delim('[') {
			return fmt.Errorf("submissions is an array, not %v", t)
		}
		for dec.More() {
			if len(b.Submissions) == MaxBatchSubmissions {
				return fmt.Errorf("a batch holds at most %d submissions", MaxBatchSubmissions)
			}
			var r SubmitRequest
			if err := dec.Decode(&r); err != nil {
				return err
			}
			b.Submissions = append(b.Submissions, r)
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}
