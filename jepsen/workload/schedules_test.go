package workload

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
)

// fakeScheduler keeps the schedules POST /v1/schedules creates and
// answers GET /v1/schedules/{name} and POST .../suspend. lost makes the
// next creates commit and answer 503, as a master whose answer was lost
// after the commit; down makes the next creates and suspends answer 503
// without committing.
type fakeScheduler struct {
	mu        sync.Mutex
	rows      map[string]api.ScheduleRequest
	lost      int
	down      int
	suspended []string
}

func (f *fakeScheduler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(status int, code api.Code) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(api.Error{Error: string(code), Code: code})
	}
	rest, _ := strings.CutPrefix(r.URL.Path, "/v1/schedules")
	name, suspend := strings.CutSuffix(strings.TrimPrefix(rest, "/"), "/suspend")
	switch {
	case (r.Method == http.MethodPost && name == "" || suspend) && f.down > 0:
		f.down--
		fail(http.StatusServiceUnavailable, api.CodeUnavailable)
	case r.Method == http.MethodPost && name == "":
		var req api.ScheduleRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if _, ok := f.rows[req.Name]; ok {
			fail(http.StatusConflict, api.CodeScheduleExists)
			return
		}
		f.rows[req.Name] = req
		if f.lost > 0 {
			f.lost--
			fail(http.StatusServiceUnavailable, api.CodeUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.ScheduleStatus{Schedule: model.Schedule{Name: req.Name}})
	case suspend:
		f.suspended = append(f.suspended, name)
		_ = json.NewEncoder(w).Encode(api.ScheduleStatus{Schedule: model.Schedule{Name: name, Suspended: true}})
	case r.Method == http.MethodGet:
		req, ok := f.rows[name]
		if !ok {
			fail(http.StatusNotFound, api.CodeUnknownSchedule)
			return
		}
		_ = json.NewEncoder(w).Encode(api.ScheduleStatus{Schedule: model.Schedule{Name: name, Cron: req.Cron,
			Concurrency: req.Concurrency, StartingDeadlineMS: req.StartingDeadlineMS,
			Template: model.SubmitDriver{DriverSpec: req.Template.DriverSpec}}})
	default:
		fail(http.StatusBadRequest, api.CodeInvalidRequest)
	}
}

func newScheduler(t *testing.T, f *fakeScheduler) *client.Client {
	t.Helper()
	f.rows = map[string]api.ScheduleRequest{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cl, err := client.New([]string{srv.Listener.Addr().String()}, client.Options{RetryInterval: 10 * time.Millisecond, NoBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestCreateSchedules: every schedule is created once through answers
// without authority; a create committed whose answer was lost finds its
// name taken on the retry and counts as created, since the row is the
// one it asked for. Suspending goes through such answers too.
func TestCreateSchedules(t *testing.T) {
	f := &fakeScheduler{lost: 1, down: 2}
	cl := newScheduler(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reqs := Schedules("/bin/probe", "/probes")
	if err := CreateSchedules(ctx, cl, reqs); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	if len(f.rows) != len(reqs) {
		t.Fatalf("%d schedules created, want %d", len(f.rows), len(reqs))
	}
	f.down = 1
	f.mu.Unlock()
	if err := SuspendSchedules(ctx, cl, []string{"every-2s", "every-3s-forbid"}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := strings.Join(f.suspended, ","); got != "every-2s,every-3s-forbid" {
		t.Fatalf("suspended %s", got)
	}
}

// TestCreateSchedulesNotOurs: a name taken on the first try, or taken on
// a retry by a schedule that is not the one asked for, ends the setup
// naming the schedule.
func TestCreateSchedulesNotOurs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reqs := Schedules("/bin/probe", "/probes")[:1]
	other := reqs[0]
	other.Cron = "@every 5s"

	f := &fakeScheduler{}
	cl := newScheduler(t, f)
	f.rows[other.Name] = other
	err := CreateSchedules(ctx, cl, reqs)
	if !errors.Is(err, model.ErrScheduleExists) || !strings.Contains(err.Error(), "schedule every-2s not created") {
		t.Fatalf("taken at once: got %v", err)
	}

	f = &fakeScheduler{down: 1}
	cl = newScheduler(t, f)
	f.rows[other.Name] = other
	err = CreateSchedules(ctx, cl, reqs)
	if err == nil || err.Error() != "schedule every-2s not created: the name is taken by another schedule (@every 5s, allow)" {
		t.Fatalf("taken on a retry: got %v", err)
	}
}
