package api

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

// A batch decodes strictly, as every body a master reads, and a body
// with more submissions than a batch may hold is refused at the first one
// past the bound, before the rest are decoded.
func TestSubmitBatchRequestDecoding(t *testing.T) {
	items := func(n int, item string) string {
		return `{"submissions":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
	}
	sub := `{"token":"t","argv":["x"],"cores":1,"memory_mb":1}`
	for _, c := range []struct {
		name, body string
		n          int // submissions decoded; -1 for a refusal
	}{
		{"full", items(MaxBatchSubmissions, sub), MaxBatchSubmissions},
		{"one too many", items(MaxBatchSubmissions+1, sub), -1},
		{"a million empty ones", items(1_000_000, `{}`), -1},
		{"empty", `{"submissions":[]}`, 0},
		{"null submissions", `{"submissions":null}`, 0},
		{"no submissions", `{}`, 0},
		{"field names as encoding/json matches them", `{"Submissions":[` + sub + `]}`, 1},
		{"unknown field", `{"submissions":[],"extra":1}`, -1},
		{"unknown field of a submission", items(1, `{"token":"t","gpus":1}`), -1},
		{"not an array", `{"submissions":{"token":"t"}}`, -1},
		{"not an object", `[` + sub + `]`, -1},
		{"a submission of the wrong shape", items(1, `{"cores":"one"}`), -1},
	} {
		var b SubmitBatchRequest
		err := json.Unmarshal([]byte(c.body), &b)
		if c.n < 0 {
			if err == nil {
				t.Errorf("%s: decoded %d submissions, want a refusal", c.name, len(b.Submissions))
			}
			continue
		}
		if err != nil || len(b.Submissions) != c.n {
			t.Errorf("%s: %d submissions, %v; want %d", c.name, len(b.Submissions), err, c.n)
		}
	}
}

// Refusing a body of a million empty submissions allocates about what a
// full batch takes, not a million submissions' worth (some 200 MB).
func TestOversizeBatchIsRefusedEarly(t *testing.T) {
	body := []byte(`{"submissions":[` + strings.TrimSuffix(strings.Repeat("{},", 1_000_000), ",") + `]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var r SubmitBatchRequest
	err := json.Unmarshal(body, &r)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("decoded %d submissions", len(r.Submissions))
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("refusing it allocated %d MiB", n>>20)
	}
}

// HeldByNamespace knows the namespace's reasons, as master/service words
// them, on a waiting driver alone; not the workers' reasons, nor a placed
// or ended driver's message.
func TestHeldByNamespace(t *testing.T) {
	waiting := func(msg string) *model.Driver {
		return &model.Driver{State: model.DriverSubmitted, Message: msg}
	}
	for _, msg := range []string{
		fmt.Sprintf(ReasonQuota+" (%d of %d)", "etl", "cores", 4, 4),
		fmt.Sprintf(ReasonQuota+" (%d of %d)", "etl", "running drivers", 1, 1),
		fmt.Sprintf(ReasonQuota+" (%d of %d MiB)", "etl", "memory", 4096, 4096),
		fmt.Sprintf(ReasonDriverShare+" (%d of %d cores)", "etl", 4, 4),
		fmt.Sprintf(ReasonDriverShare+": its work and its drivers' apps hold or ask %d of %d cores", "etl", 8, 8),
	} {
		if !HeldByNamespace(waiting(msg)) {
			t.Errorf("%q is not taken for the namespace's", msg)
		}
		placed := waiting(msg)
		placed.WorkerID = "w1"
		ended := waiting(msg)
		ended.State = model.DriverKilled
		if HeldByNamespace(placed) || HeldByNamespace(ended) {
			t.Errorf("%q on a placed or ended driver is taken for a wait", msg)
		}
	}
	for _, msg := range []string{"", "queued for placement", "waiting for a worker with free resources", "waiting: no ALIVE worker",
		"drivers are at --max-running-drivers (2)", "priority: 1 driver of priority 80 is ahead", "fair share: etl holds 0.75 of the cluster, ml 0.25",
		"namespace etl was deleted"} {
		if HeldByNamespace(waiting(msg)) {
			t.Errorf("%q is taken for the namespace's", msg)
		}
	}
}
