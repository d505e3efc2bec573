package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
)

// noLeader answers as a master that refused before any work (an
// election under way).
func noLeader(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(api.Error{Error: "master m knows no leader", Code: api.CodeNoLeader})
}

// A manual run sent during an election waits for the new leader: every
// master said it did nothing, so the round is tried again, and the run
// is started once.
func TestRunScheduleWaitsOutAnElection(t *testing.T) {
	var rounds, runs atomic.Int32
	leader := server(t, func(w http.ResponseWriter, r *http.Request) {
		if rounds.Add(1) <= 3 {
			noLeader(w, r)
			return
		}
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"driver_id":"driver-1","slot":1}`))
	})
	follower := server(t, noLeader)
	c := newClient(t, Options{RetryInterval: time.Millisecond, MaxRetryInterval: 4 * time.Millisecond}, leader, follower)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := c.RunSchedule(ctx, "nightly")
	if err != nil || id != "driver-1" {
		t.Fatalf("RunSchedule = %q, %v; want driver-1", id, err)
	}
	if runs.Load() != 1 || rounds.Load() != 4 {
		t.Fatalf("the leader was asked %d times and ran %d; want 4 and 1", rounds.Load(), runs.Load())
	}
}

// A 503 that does not say nothing was done (a commit not confirmed)
// ends the call at once: sending it again could start a second run.
func TestRunScheduleDoesNotRepeatAnUncertainWrite(t *testing.T) {
	var asked atomic.Int32
	m := server(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(api.Error{Error: "commit not confirmed, it may or may not have happened", Code: api.CodeUnavailable})
	})
	other := server(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"driver_id":"driver-2","slot":1}`))
	})
	c := newClient(t, Options{RetryInterval: time.Millisecond}, m, other)
	c.prefer(m, m)
	_, err := c.RunSchedule(context.Background(), "nightly")
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, api.ErrNoLeader) || asked.Load() != 1 {
		t.Fatalf("RunSchedule = %v after %d requests; want the uncertain refusal after 1, saying the outcome is unknown", err, asked.Load())
	}
}

// Through a whole election that does not end in time, the call ends
// with the context, naming why each master refused.
func TestRunScheduleGivesUpWithItsContext(t *testing.T) {
	c := newClient(t, Options{RetryInterval: time.Millisecond, MaxRetryInterval: 2 * time.Millisecond}, server(t, noLeader), server(t, noLeader))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.RunSchedule(ctx, "nightly")
	if !errors.Is(err, ErrNoMaster) || ctx.Err() == nil {
		t.Fatalf("RunSchedule = %v; want ErrNoMaster once the context ended", err)
	}
}

// A context that ends between rounds, every master having said it did
// nothing, leaves no doubt: the run did not happen.
func TestRunScheduleEndedBetweenRoundsDidNothing(t *testing.T) {
	c := newClient(t, Options{RetryInterval: time.Minute, MaxRetryInterval: time.Minute}, server(t, noLeader), server(t, noLeader))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.RunSchedule(ctx, "nightly")
	if !errors.Is(err, ErrNoMaster) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("RunSchedule = %v; want ErrNoMaster, the outcome known", err)
	}
}

// A suspension goes to one master, not to each: one entry, one event.
func TestSuspendScheduleGoesToOneMaster(t *testing.T) {
	var asked atomic.Int32
	answer := func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.Write([]byte(`{"name":"nightly","suspended":true}`))
	}
	c := newClient(t, Options{}, server(t, answer), server(t, answer), server(t, answer))
	st, err := c.SuspendSchedule(context.Background(), "nightly")
	if err != nil || !st.Suspended || asked.Load() != 1 {
		t.Fatalf("SuspendSchedule = %+v, %v after %d requests; want suspended after 1", st, err, asked.Load())
	}
}

// A master that hangs past the call's context (paused, cut off) ends
// the call as no master answering (ErrNoMaster: the CLI's exit 2), not
// as a refusal of the write; since that master holds the request and
// may yet commit it, the error says the outcome is unknown.
func TestCreateScheduleHungMasterIsNoMaster(t *testing.T) {
	release := make(chan struct{})
	hung := server(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	c := newClient(t, Options{RequestTimeout: time.Minute}, hung)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.CreateSchedule(ctx, api.ScheduleRequest{Name: "nightly"})
	if !errors.Is(err, ErrNoMaster) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("CreateSchedule = %v; want ErrNoMaster, the outcome unknown, once the context ended", err)
	}
}
