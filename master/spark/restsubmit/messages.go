// Package restsubmit serves Spark standalone's REST submission protocol, so
// that spark-submit --deploy-mode cluster --master spark://HOST:PORT (Spark's
// RestSubmissionClient) and other tools written against Spark's
// StandaloneRestServer can submit, query and kill Drover drivers.
//
// Protocol version v1, as Spark 4's RestSubmissionServer serves it:
//
//	POST /v1/submissions/create        CreateSubmissionRequest -> CreateSubmissionResponse
//	GET  /v1/submissions/status/{id}   -> SubmissionStatusResponse
//	POST /v1/submissions/kill/{id}     -> KillSubmissionResponse
//	POST /v1/submissions/killall       -> KillAllSubmissionResponse (kills every driver that has not ended)
//	POST /v1/submissions/clear         -> ClearResponse (drops every finished driver and app; operator access)
//	GET  /v1/submissions/readyz        -> ReadyzResponse, or 503 ErrorResponse (no credential needed)
//
// Every other path gets an ErrorResponse: 400, or 468 with
// highestProtocolVersion "v1" when the path names another protocol version.
//
// The handler holds no state and makes no decision of its own beyond
// translating: it turns a CreateSubmissionRequest into an api.SubmitRequest
// through a Launcher (the argv template of the driver program) and hands it,
// with the other requests, to a Backend, which is the master's own API
// path, so that authorization, validation and forwarding to the leader stay
// in one place.
package restsubmit

// ProtocolVersion is the only REST protocol version Spark has defined, and
// the one served here.
const ProtocolVersion = "v1"

// StatusUnknownProtocolVersion is the HTTP status Spark's server answers
// for a path naming a protocol version it does not speak
// (RestSubmissionServer.SC_UNKNOWN_PROTOCOL_VERSION).
const StatusUnknownProtocolVersion = 468

// ServerSparkVersion is what responses carry in serverSparkVersion: the
// Spark release whose REST protocol this package follows (4.0 added
// killall, clear and readyz to 3.5's create, kill and status). Spark's
// client only requires the field to be present.
const ServerSparkVersion = "4.0.0"

// DefaultPort is Spark's default REST port (spark.master.rest.port).
const DefaultPort = 6066

// backupPrefix starts the message of a kill or status answer when no
// leader could be reached. Spark's RestSubmissionClient tests kill answers
// for this prefix (Utils.responseFromBackup, written for a standby master)
// to move on to the next master of a spark://a:6066,b:6066 URL, so it is
// part of the protocol rather than prose.
const backupPrefix = "Current state is not alive"

// Action names of Spark's protocol messages (the simple class names that
// Spark writes in the action field).
const (
	ActionCreateSubmissionRequest  = "CreateSubmissionRequest"
	ActionCreateSubmissionResponse = "CreateSubmissionResponse"
	ActionKillSubmissionResponse   = "KillSubmissionResponse"
	ActionSubmissionStatusResponse = "SubmissionStatusResponse"
	ActionErrorResponse            = "ErrorResponse"
	// Spark 4's.
	ActionKillAllSubmissionResponse = "KillAllSubmissionResponse"
	ActionClearResponse             = "ClearResponse"
	ActionReadyzResponse            = "ReadyzResponse"
)

// otherActions are the messages of Spark's protocol (through Spark 4) that
// are not a request this server takes; a body naming one is a message of
// the wrong type (400), as in Spark's SubmitRequestServlet.
var otherActions = map[string]bool{
	ActionCreateSubmissionResponse: true, ActionKillSubmissionResponse: true,
	ActionSubmissionStatusResponse: true, ActionErrorResponse: true,
	ActionKillAllSubmissionResponse: true, ActionClearResponse: true, ActionReadyzResponse: true,
}

// CreateSubmissionRequest follows Spark's CreateSubmissionRequest
// (SubmitRestProtocolRequest.scala): what spark-submit posts to
// /v1/submissions/create. Pointer fields tell a missing or null field from
// an empty one, as Spark's validation does.
type CreateSubmissionRequest struct {
	Action               string             `json:"action"`
	AppArgs              []*string          `json:"appArgs,omitempty"`
	AppResource          *string            `json:"appResource,omitempty"`
	ClientSparkVersion   *string            `json:"clientSparkVersion,omitempty"`
	EnvironmentVariables map[string]*string `json:"environmentVariables,omitempty"`
	MainClass            *string            `json:"mainClass,omitempty"`
	Message              *string            `json:"message,omitempty"`
	SparkProperties      map[string]*string `json:"sparkProperties,omitempty"`
}

// knownCreateFields are the fields of a CreateSubmissionRequest; any other
// is reported back in unknownFields, as Spark's server does.
var knownCreateFields = map[string]bool{
	"action": true, "appArgs": true, "appResource": true, "clientSparkVersion": true,
	"environmentVariables": true, "mainClass": true, "message": true, "sparkProperties": true,
}

// CreateSubmissionResponse follows Spark's CreateSubmissionResponse
// (SubmitRestProtocolResponse.scala). Fields are in Spark's (alphabetical)
// order and absent ones are left out, as Spark's Jackson mapper writes them.
type CreateSubmissionResponse struct {
	Action             string   `json:"action"`
	Message            string   `json:"message,omitempty"`
	ServerSparkVersion string   `json:"serverSparkVersion"`
	SubmissionID       string   `json:"submissionId,omitempty"`
	Success            bool     `json:"success"`
	UnknownFields      []string `json:"unknownFields,omitempty"`
}

// KillSubmissionResponse follows Spark's KillSubmissionResponse.
type KillSubmissionResponse struct {
	Action             string `json:"action"`
	Message            string `json:"message,omitempty"`
	ServerSparkVersion string `json:"serverSparkVersion"`
	SubmissionID       string `json:"submissionId"`
	Success            bool   `json:"success"`
}

// SubmissionStatusResponse follows Spark's SubmissionStatusResponse.
// DriverState is one of Spark's DriverState names, which Drover's driver
// states share (model.DriverState); WorkerHostPort is the worker's HTTP
// address.
type SubmissionStatusResponse struct {
	Action             string `json:"action"`
	DriverState        string `json:"driverState,omitempty"`
	Message            string `json:"message,omitempty"`
	ServerSparkVersion string `json:"serverSparkVersion"`
	SubmissionID       string `json:"submissionId"`
	Success            bool   `json:"success"`
	WorkerHostPort     string `json:"workerHostPort,omitempty"`
	WorkerID           string `json:"workerId,omitempty"`
}

// Response is the shape of Spark 4's KillAllSubmissionResponse,
// ClearResponse and ReadyzResponse, which add no field to
// SubmitRestProtocolResponse; Action names which it is. Message is always
// written (Spark writes "" where it has nothing to say).
type Response struct {
	Action             string `json:"action"`
	Message            string `json:"message"`
	ServerSparkVersion string `json:"serverSparkVersion"`
	Success            bool   `json:"success"`
}

// ErrorResponse follows Spark's ErrorResponse: the body of every 4xx and 5xx
// answer. HighestProtocolVersion is set only on 468 answers.
type ErrorResponse struct {
	Action                 string `json:"action"`
	HighestProtocolVersion string `json:"highestProtocolVersion,omitempty"`
	Message                string `json:"message"`
	ServerSparkVersion     string `json:"serverSparkVersion"`
}
