package api

import (
	"net/http"
	"net/url"
	"strconv"
)

// Paths of the endpoints that name a row, for the programs that call the
// API (the client, and a master forwarding to the leader). IDs are
// path-escaped.
const (
	// PathDrivers is POST (submit) and GET (list).
	PathDrivers = "/v1/drivers"
	// PathSubmitBatch is POST of a SubmitBatchRequest.
	PathSubmitBatch = "/v1/drivers/batch"
	// PathKillAllDrivers kills every driver that has not ended.
	PathKillAllDrivers = "/v1/drivers/kill-all"
	// PathApps is POST (register) and GET (list).
	PathApps = "/v1/apps"
	// PathRegisterWorker is a worker's registration.
	PathRegisterWorker = "/v1/workers/register"
	// PathState is the cluster view.
	PathState = "/v1/state"
	// PathRaftPeers and the other operator paths follow Consul's operator
	// raft commands.
	PathRaftPeers          = "/v1/operator/raft/peers"
	PathAddVoter           = "/v1/operator/raft/add-voter"
	PathRemovePeer         = "/v1/operator/raft/remove-peer"
	PathTransferLeadership = "/v1/operator/raft/transfer-leadership"
	// PathSnapshot is GET (save) and POST (restore).
	PathSnapshot = "/v1/operator/snapshot"
	// PathBlobs is the masters' store of uploaded files, one per SHA-256.
	PathBlobs = "/v1/blobs"
	// PathClearCompleted drops every finished driver and app.
	PathClearCompleted = "/v1/operator/clear-completed"
	// PathNamespaces is GET (list); a namespace's name follows for GET,
	// PUT (apply) and DELETE.
	PathNamespaces = "/v1/namespaces"
	// PathACLTokens is POST (create) and GET (list); an accessor follows
	// for DELETE (revoke).
	PathACLTokens = "/v1/acl/tokens"
)

// MaxHeaderBytes bounds a request's line and headers on every listener
// of a master (http.Server.MaxHeaderBytes): 64 KiB. A longer request is
// answered 431, or its connection reset before the answer is read, so
// the client refuses one before sending it.
const MaxHeaderBytes = 64 << 10

// BlobPath is /v1/blobs/SHA256: PUT stores an uploaded file (the body,
// which must hash to SHA256), GET and HEAD read it.
func BlobPath(sha256 string) string { return PathBlobs + "/" + url.PathEscape(sha256) }

// DriverPath is /v1/drivers/ID followed by suffix ("", "/kill", "/logs").
func DriverPath(id, suffix string) string { return PathDrivers + "/" + url.PathEscape(id) + suffix }

// AppPath is /v1/apps/ID followed by suffix ("", "/watch", "/executors",
// "/executors/kill", "/unregister", "/kill").
func AppPath(id, suffix string) string { return PathApps + "/" + url.PathEscape(id) + suffix }

// ExecutorLogsPath is /v1/apps/ID/executors/N/logs.
func ExecutorLogsPath(appID string, executor int) string {
	return AppPath(appID, "/executors/"+strconv.Itoa(executor)+"/logs")
}

// WorkerPath is /v1/workers/ID followed by suffix ("/heartbeat",
// "/decommission").
func WorkerPath(id, suffix string) string { return "/v1/workers/" + url.PathEscape(id) + suffix }

// HeaderLogSize carries, on a log answer, the size in bytes of the whole
// stream when the answer was made, bytes rotated away included: the
// offset just past its last byte.
const HeaderLogSize = "X-Drover-Log-Size"

// HeaderLogStart carries, on a log answer, the offset of the answer's
// first byte: the offset asked for or, when the bytes there were rotated
// away, where the stream now starts. A reader continues from it plus the
// answer's length. An answer without it (an older worker) starts at the
// offset asked for.
const HeaderLogStart = "X-Drover-Log-Start"

// LogHeaders reads a log answer's HeaderLogStart and HeaderLogSize, for a
// request from offset: start is offset when the answer has no
// HeaderLogStart (an older worker), a missing or malformed size is 0.
func LogHeaders(h http.Header, offset int64) (start, size int64) {
	start = offset
	if v, err := strconv.ParseInt(h.Get(HeaderLogStart), 10, 64); err == nil {
		start = v
	}
	size, _ = strconv.ParseInt(h.Get(HeaderLogSize), 10, 64)
	return start, size
}

// Log streams, as the stream query parameter names them.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)
