package main

import "time"

// The driver-executor protocol: JSON over HTTP, executors pull.
//
//	POST /v1/task    taskRequest  -> taskResponse
//	POST /v1/result  resultRequest -> resultResponse
//	GET  /v1/status  -> jobStatus
//
// A slot is one task thread of an executor (an executor with C cores runs C
// slots). Asking for a task means the slot is idle: whatever shard it held
// is released. Results are merged by shard ID and the first one wins, so a
// shard computed twice (speculation, a retried post) counts once.

// taskRequest asks for work for one slot of one executor.
type taskRequest struct {
	Executor int `json:"executor"`
	Slot     int `json:"slot"`
}

// taskResponse holds exactly one of: a shard to count, Done (exit), or
// WaitMS (nothing useful to do right now; ask again after that long).
type taskResponse struct {
	Shard  *shardTask `json:"shard,omitempty"`
	Done   bool       `json:"done,omitempty"`
	WaitMS int        `json:"wait_ms,omitempty"`
}

// shardTask is one shard: the files to count.
type shardTask struct {
	ID    int      `json:"id"`
	Files []string `json:"files"`
}

// resultRequest reports a shard: its counts, or the error that stopped it.
// Counts[i] is the count of Words[i]: two arrays rather than an object,
// because encoding/json sorts an object's keys, which doubled the cost of
// sending a result.
type resultRequest struct {
	Executor int      `json:"executor"`
	Slot     int      `json:"slot"`
	Shard    int      `json:"shard"`
	Words    []string `json:"words,omitempty"`
	Counts   []int    `json:"counts,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// setCounts fills Words and Counts from a count map.
func (r *resultRequest) setCounts(counts map[string]int) {
	r.Words = make([]string, 0, len(counts))
	r.Counts = make([]int, 0, len(counts))
	for w, c := range counts {
		r.Words = append(r.Words, w)
		r.Counts = append(r.Counts, c)
	}
}

// resultResponse says whether the result was the first for its shard and
// whether the job is complete.
type resultResponse struct {
	Accepted bool `json:"accepted"`
	Done     bool `json:"done"`
}

// jobStatus is the driver's progress, for people and tests.
type jobStatus struct {
	Shards  int `json:"shards"`
	Done    int `json:"done"`
	Pending int `json:"pending"`
	Running int `json:"running"`
	// Requeued counts shards put back in the queue because the executor
	// running them ended or failed them.
	Requeued int `json:"requeued"`
	// Speculative counts duplicate copies handed to idle slots.
	Speculative int `json:"speculative"`
	// Duplicates counts results ignored because their shard was done.
	Duplicates int `json:"duplicates"`
	// LostExecutors counts executors reported ended before the job was.
	LostExecutors int `json:"lost_executors"`
	Failures      int `json:"failures"`
}

// Bounds of the protocol.
const (
	// maxTaskBody bounds a task request, which is two numbers.
	maxTaskBody = 4 << 10
	// maxResultBody bounds a result: the distinct words of one shard. A
	// shard of the whole Go tree encodes to a few MiB.
	maxResultBody = 256 << 20
	// maxTaskFailures is how many times a shard may fail (an unreadable
	// file) before the job fails, as Spark's spark.task.maxFailures.
	maxTaskFailures = 4
	// waitHint is the longest a slot with nothing to do waits before
	// asking again.
	waitHint = 200 * time.Millisecond
	// speculationMultiplier: a running shard is copied once it has run
	// this many times the median time of the shards done so far (Spark's
	// spark.speculation.multiplier), so balanced shards finishing together
	// are not all computed twice.
	speculationMultiplier = 1.5
)
