package worker

import (
	"slices"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// A unit's staging reports keep only the latest line queued: a newer one
// replaces the one not yet acknowledged, the acknowledgement of a line
// sent before does not drop a newer one, and the program's start drops
// whatever line is left, so a flapping server costs the leader one
// report per change the worker could not yet send, not one per try.
func TestStagingReportsKeepTheLatestLine(t *testing.T) {
	st := &workerState{wake: make(chan struct{}, 1)}
	s := &session{st: st}
	k, other := attemptKey("driver-20260101000000-1", 1), attemptKey("driver-20260101000000-2", 1)
	staging := func(k unitKey, line string) report {
		return report{key: k, state: model.DriverSubmitted, reason: line, staging: true}
	}
	lines := func() []string {
		var out []string
		for _, r := range st.unacked {
			out = append(out, r.key.id+" "+string(r.state)+" "+r.reason)
		}
		return out
	}
	echo := func(rs ...report) api.HeartbeatResponse {
		var resp api.HeartbeatResponse
		for _, r := range rs {
			resp.Acked = append(resp.Acked, r.attemptReport())
		}
		return resp
	}
	sent := staging(k, "try 1")
	st.queue(sent)
	st.queue(staging(other, "try 1"))
	st.queue(staging(k, "try 2"))
	if got, want := lines(), []string{other.id + " SUBMITTED try 1", k.id + " SUBMITTED try 2"}; !slices.Equal(got, want) {
		t.Fatalf("queued %q, want %q", got, want)
	}
	s.ack(echo(sent))
	if got, want := lines(), []string{other.id + " SUBMITTED try 1", k.id + " SUBMITTED try 2"}; !slices.Equal(got, want) {
		t.Fatalf("after the ack of try 1 queued %q, want %q", got, want)
	}
	st.queue(report{key: k, state: model.DriverRunning, runs: 1})
	if got, want := lines(), []string{other.id + " SUBMITTED try 1", k.id + " RUNNING "}; !slices.Equal(got, want) {
		t.Fatalf("after RUNNING queued %q, want %q", got, want)
	}
	s.ack(echo(staging(other, "try 1")))
	if got, want := lines(), []string{k.id + " RUNNING "}; !slices.Equal(got, want) {
		t.Fatalf("after the ack of other's line queued %q, want %q", got, want)
	}

	// An executor's staging goes out LAUNCHING, and is acknowledged so.
	e := executorKey("app-20260101000000-0001", 0)
	st.queue(staging(e, "try 1"))
	r := st.unacked[len(st.unacked)-1].executorReport()
	if r.State != model.ExecLaunching || !r.Staging || r.Reason != "try 1" {
		t.Fatalf("executor report %+v, want LAUNCHING staging try 1", r)
	}
	s.ack(api.HeartbeatResponse{AckedExecutors: []model.ExecutorReport{r}})
	if got, want := lines(), []string{k.id + " RUNNING "}; !slices.Equal(got, want) {
		t.Fatalf("after the executor's ack queued %q, want %q", got, want)
	}
}
