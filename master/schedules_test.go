package master

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master/schedule"
	"github.com/drover-project/drover/model"
)

// scheduleClient is a client of m presenting token.
func scheduleClient(t *testing.T, m *Master, token string) *client.Client {
	t.Helper()
	cl, err := client.New([]string{m.HTTPAddr()}, client.Options{Token: token, RequestTimeout: 5 * time.Second, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// nightly is a schedule at 03:00 in namespace ns ("" for none).
func nightly(name, ns string) api.ScheduleRequest {
	return api.ScheduleRequest{Name: name, Cron: "0 3 * * *", Template: api.SubmitRequest{Name: "etl",
		DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64, Namespace: ns}}}
}

// stateHash is m's tables' hash.
func stateHash(t *testing.T, cl *client.Client) string {
	t.Helper()
	st, err := cl.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.StateHash
}

// Creating a schedule answers 201 with its settings, defaults filled in,
// and its next slot in its zone; each bad request is refused with one
// line and nothing committed, a history taken at its bound and refused
// past it, and a schedule past --max-schedules refused. Then get, list by
// namespace, suspend (no next slot) and resume, a manual run (its
// driver names the schedule and the slot; the drivers list filters by
// schedule), a forbid schedule's second run refused while the first has
// not ended, and delete, which leaves the run going.
func TestScheduleRules(t *testing.T) {
	m := scopeMaster(t, func(c *Config) { c.MaxSchedules = 3 })
	cl, ctx := scheduleClient(t, m, scopeOperator), context.Background()

	req := nightly("nightly", "")
	req.TimeZone = "Europe/Berlin"
	req.Cron = " 0\t3  * * * "
	code, body := call(t, m, http.MethodPost, api.PathSchedules, scopeSubmit, req)
	var st api.ScheduleStatus
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("create: %d %s, want 201", code, body)
	}
	berlin, _ := schedule.Zone("Europe/Berlin")
	if next := time.UnixMilli(st.Next).In(berlin); st.History != model.DefaultHistory || st.Concurrency != model.ConcurrencyAllow ||
		next.Hour() != 3 || next.Minute() != 0 || st.Template.Name != "etl" || st.Suspended || st.Cron != "0 3 * * *" {
		t.Fatalf("created %+v, next %v; want history 10, allow, next at 03:00 Berlin, the spec with single spaces", st, next)
	}

	hash := stateHash(t, cl)
	bad := func(what string, mutate func(*api.ScheduleRequest), want error, say string) {
		t.Helper()
		r := nightly("other", "")
		mutate(&r)
		_, err := cl.CreateSchedule(ctx, r)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), say) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "invalid command") {
			t.Errorf("%s: %v; want one line wrapping %v saying %q", what, err, want, say)
		}
		if h := stateHash(t, cl); h != hash {
			t.Errorf("%s: the tables changed", what)
		}
	}
	bad("bad field", func(r *api.ScheduleRequest) { r.Cron = "61 * * * *" }, api.ErrInvalidRequest, `field 1 (minute) "61"`)
	bad("four fields", func(r *api.ScheduleRequest) { r.Cron = "0 3 * *" }, api.ErrInvalidRequest, "has 4 fields")
	bad("unknown zone", func(r *api.ScheduleRequest) { r.TimeZone = "Mars/Olympus" }, api.ErrInvalidRequest, `unknown time zone "Mars/Olympus"`)
	bad("name taken", func(r *api.ScheduleRequest) { r.Name = "nightly" }, model.ErrScheduleExists, "schedule nightly exists")
	bad("unknown namespace", func(r *api.ScheduleRequest) { r.Template.Namespace = "nope" }, model.ErrUnknownNamespace, "unknown namespace: nope: nothing created")
	bad("long concurrency", func(r *api.ScheduleRequest) { r.Concurrency = model.Concurrency(strings.Repeat("x", 5000)) }, api.ErrInvalidRequest,
		"a concurrency of 5000 bytes is not allow, forbid or replace")
	bad("no program", func(r *api.ScheduleRequest) { r.Template.Argv = nil }, api.ErrInvalidRequest, "the program is empty")
	bad("bad environment", func(r *api.ScheduleRequest) { r.Template.Env = map[string]string{"": "x"} }, api.ErrInvalidRequest, "environment name")
	bad("template token", func(r *api.ScheduleRequest) { r.Template.Token = "tok" }, api.ErrInvalidRequest, "the template takes no token")
	bad("history 0", func(r *api.ScheduleRequest) { r.History = ptrTo(0) }, api.ErrInvalidRequest, "the history must be 1 to 1000 runs, got 0")
	bad("history past", func(r *api.ScheduleRequest) { r.History = ptrTo(model.MaxHistory + 1) }, api.ErrInvalidRequest, "got 1001")
	bad("negative deadline", func(r *api.ScheduleRequest) { r.StartingDeadlineMS = -1 }, api.ErrInvalidRequest, "the starting deadline must be positive")
	bad("deadline past five years", func(r *api.ScheduleRequest) { r.StartingDeadlineMS = model.MaxStartingDeadlineMS + 1 }, api.ErrInvalidRequest,
		"the starting deadline must be at most 157680000000 ms (five years), got 157680000001")
	bad("never fires", func(r *api.ScheduleRequest) { r.Cron = "0 0 30 2 *" }, api.ErrInvalidRequest, `cron spec "0 0 30 2 *" has no slot within five years: nothing created`)
	bad("concurrency", func(r *api.ScheduleRequest) { r.Concurrency = "sometimes" }, api.ErrInvalidRequest, `concurrency "sometimes"`)
	bad("bad name", func(r *api.ScheduleRequest) { r.Name = "Not A Label" }, api.ErrInvalidRequest, "schedule")

	edge := nightly("edge", "etl")
	edge.History = ptrTo(model.MaxHistory)
	edge.StartingDeadlineMS = model.MaxStartingDeadlineMS
	if st, err := cl.CreateSchedule(ctx, edge); err != nil || st.History != model.MaxHistory {
		t.Fatalf("history and deadline at their bounds: %+v, %v", st, err)
	}
	solo := nightly("solo", "")
	solo.Concurrency = model.ConcurrencyForbid
	if _, err := cl.CreateSchedule(ctx, solo); err != nil {
		t.Fatal(err)
	}
	hash = stateHash(t, cl)
	bad("past --max-schedules", func(r *api.ScheduleRequest) { r.Name = "fourth" }, api.ErrLimitReached, "the cluster holds 3 schedules, its --max-schedules")

	if _, err := cl.Schedule(ctx, "nope"); !errors.Is(err, model.ErrUnknownSchedule) {
		t.Fatalf("unknown schedule: %v", err)
	}
	// Every write to an unknown schedule: one line saying what was not
	// done, and the tables unchanged.
	for _, c := range []struct {
		verb string
		do   func() error
		say  string
	}{
		{"suspend", func() error { _, err := cl.SuspendSchedule(ctx, "nope"); return err }, "unknown schedule: nope: nothing changed"},
		{"resume", func() error { _, err := cl.ResumeSchedule(ctx, "nope"); return err }, "unknown schedule: nope: nothing changed"},
		{"run", func() error { _, err := cl.RunSchedule(ctx, "nope"); return err }, "unknown schedule: nope: nothing started"},
		{"delete", func() error { _, err := cl.DeleteSchedule(ctx, "nope"); return err }, "unknown schedule: nope: nothing deleted"},
	} {
		if err := c.do(); !errors.Is(err, model.ErrUnknownSchedule) || err.Error() != c.say {
			t.Errorf("%s of an unknown schedule: %v; want the line %q", c.verb, err, c.say)
		}
		if h := stateHash(t, cl); h != hash {
			t.Errorf("%s of an unknown schedule changed the tables", c.verb)
		}
	}
	for _, c := range []struct {
		ns   string
		all  bool
		want []string
	}{{"", false, []string{"edge", "nightly", "solo"}}, {"etl", false, []string{"edge"}}, {"", true, []string{"edge", "nightly", "solo"}}, {"ml", false, nil}} {
		l, err := cl.Schedules(ctx, c.ns, c.all)
		var names []string
		for _, s := range l.Schedules {
			names = append(names, s.Name)
		}
		if err != nil || strings.Join(names, ",") != strings.Join(c.want, ",") {
			t.Errorf("list %q all %v: %v, %v; want %v", c.ns, c.all, names, err, c.want)
		}
	}
	if _, err := cl.Schedules(ctx, "etl", true); !errors.Is(err, api.ErrInvalidRequest) {
		t.Errorf("namespace and all: %v, want refused", err)
	}

	if st, err := cl.SuspendSchedule(ctx, "nightly"); err != nil || !st.Suspended || st.Next != 0 {
		t.Fatalf("suspend: %+v, %v; want suspended without a next slot", st, err)
	}
	// Suspending it again answers the same and commits nothing.
	hash = stateHash(t, cl)
	if st, err := cl.SuspendSchedule(ctx, "nightly"); err != nil || !st.Suspended || stateHash(t, cl) != hash {
		t.Fatalf("suspend again: %+v, %v; want the same answer and the tables unchanged", st, err)
	}
	if st, err := cl.ResumeSchedule(ctx, "nightly"); err != nil || st.Suspended || st.Next == 0 {
		t.Fatalf("resume: %+v, %v", st, err)
	}

	before := time.Now().UnixMilli()
	id, err := cl.RunSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	d, err := cl.Driver(ctx, id)
	if err != nil || d.Schedule != "nightly" || d.Slot < before || d.Name != "etl" {
		t.Fatalf("manual run's driver: %+v, %v; want schedule nightly, slot now", d, err)
	}
	var listed []string
	if err := cl.ListDrivers(ctx, api.ListQuery{Schedule: "nightly"}, func(ds []*model.Driver) error {
		for _, d := range ds {
			listed = append(listed, d.ID)
		}
		return nil
	}); err != nil || len(listed) != 1 || listed[0] != id {
		t.Fatalf("drivers of schedule nightly: %v, %v; want %s alone", listed, err, id)
	}
	if st, err := cl.Schedule(ctx, "nightly"); err != nil || len(st.Runs) != 1 || st.Runs[0].DriverID != id || !st.Runs[0].Manual ||
		st.Runs[0].State != model.DriverSubmitted || st.ManualRuns != 1 {
		t.Fatalf("status after a manual run: %+v, %v", st, err)
	}

	first, err := cl.RunSchedule(ctx, "solo")
	if err != nil {
		t.Fatal(err)
	}
	hash = stateHash(t, cl)
	if _, err := cl.RunSchedule(ctx, "solo"); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "nothing started") {
		t.Fatalf("forbid's second run: %v; want 409 naming %s", err, first)
	}
	if h := stateHash(t, cl); h != hash {
		t.Error("a refused manual run changed the tables")
	}
	if sc, err := cl.DeleteSchedule(ctx, "solo"); err != nil || sc.Name != "solo" {
		t.Fatalf("delete: %+v, %v", sc, err)
	}
	if _, err := cl.Schedule(ctx, "solo"); !errors.Is(err, model.ErrUnknownSchedule) {
		t.Fatalf("deleted schedule: %v", err)
	}
	if d, err := cl.Driver(ctx, first); err != nil || d.State.Terminal() || d.Schedule != "solo" {
		t.Fatalf("the deleted schedule's run: %+v, %v; want it going, naming solo", d, err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A namespace token creates schedules in its namespaces only, and
// reads, suspends, runs and deletes only theirs: one of another
// namespace is 403 naming it, and lists leave it out. A read token
// reads but creates nothing. The schedule events of a namespace token's
// stream are its namespaces' only.
func TestScheduleNamespaceTokenScope(t *testing.T) {
	m := scopeMaster(t, nil)
	ctx := context.Background()
	op, etl, reader := scheduleClient(t, m, scopeOperator), scheduleClient(t, m, etlSubmit), scheduleClient(t, m, etlRead)
	if _, err := op.CreateSchedule(ctx, nightly("ml-nightly", "ml")); err != nil {
		t.Fatal(err)
	}
	st, err := etl.CreateSchedule(ctx, nightly("etl-nightly", ""))
	if err != nil || st.Template.Namespace != "etl" {
		t.Fatalf("a schedule naming no namespace from an etl token: %+v, %v; want it in etl", st, err)
	}
	code, body := call(t, m, http.MethodPost, api.PathSchedules, etlSubmit, nightly("theirs", "ml"))
	wantForbidden(t, "create in ml", code, body, "ml")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, api.V1Schedule.Path("ml-nightly")},
		{http.MethodPost, api.V1SuspendSchedule.Path("ml-nightly")},
		{http.MethodPost, api.V1ResumeSchedule.Path("ml-nightly")},
		{http.MethodPost, api.V1RunSchedule.Path("ml-nightly")},
		{http.MethodDelete, api.V1DeleteSchedule.Path("ml-nightly")},
	} {
		code, body := call(t, m, c.method, c.path, etlSubmit, nil)
		wantForbidden(t, c.method+" "+c.path, code, body, "ml")
	}
	for _, cl := range []*client.Client{etl, reader} {
		if l, err := cl.Schedules(ctx, "", true); err != nil || len(l.Schedules) != 1 || l.Schedules[0].Name != "etl-nightly" {
			t.Fatalf("list by an etl token: %+v, %v; want etl-nightly alone", l, err)
		}
	}
	if l, err := reader.Schedules(ctx, "ml", false); !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "does not grant namespace ml") {
		t.Fatalf("list of ml by an etl token: %+v, %v; want 403 naming ml, as for drivers", l, err)
	}
	if _, err := reader.CreateSchedule(ctx, nightly("read", "etl")); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("create with a read token: %v; want 403", err)
	}
	if _, err := op.SuspendSchedule(ctx, "ml-nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := op.SuspendSchedule(ctx, "etl-nightly"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.HTTPAddr()+"/v1/events?index=0&kind=schedule", nil)
	req.Header.Set("Authorization", "Bearer "+etlRead)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "ml-nightly") && !strings.Contains(line, "etl-nightly") {
			t.Fatalf("the stream of a token of etl carries ml's schedule: %s", line)
		}
		if strings.Contains(line, `"kind":"schedule","id":"etl-nightly"`) && strings.Contains(line, `"suspended":true`) {
			return
		}
	}
	t.Fatalf("the stream ended before etl-nightly's suspension: %v", sc.Err())
}

// The answer about one schedule says when no ALIVE worker could hold its
// driver even idle, as a waiting driver's message would, so that create
// can warn where submit exits 3; a list leaves it out. A DEAD worker
// large enough, or no worker at all, says nothing; a worker at the
// driver's bounds exactly holds it.
func TestScheduleSaysWhenNoWorkerCouldHoldItsDriver(t *testing.T) {
	m := scopeMaster(t, nil)
	cl, ctx := scheduleClient(t, m, scopeOperator), context.Background()
	create := func(name string, cores int, memoryMB int64, res model.ResourceAmounts) api.ScheduleStatus {
		t.Helper()
		req := nightly(name, "")
		req.Template.Cores, req.Template.MemoryMB, req.Template.Resources = cores, memoryMB, res
		st, err := cl.CreateSchedule(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := create("no-workers", 64, 64, nil); st.Unplaceable != "" {
		t.Fatalf("with no worker: unplaceable %q, want none", st.Unplaceable)
	}
	mustApply(t, m, &model.RegisterWorker{ID: "w9", HTTPAddr: "127.0.0.1:1", Cores: 64, MemoryMB: 65536, Time: 1})
	mustApply(t, m, &model.WorkerLost{WorkerID: "w9", Time: 2})
	mustApply(t, m, &model.RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:2", Cores: 4, MemoryMB: 8192, Time: 3})
	for _, c := range []struct {
		name     string
		cores    int
		memoryMB int64
		res      model.ResourceAmounts
		want     string
	}{
		{"at-bounds", 4, 8192, nil, ""},
		{"cores", 5, 64, nil, api.ReasonUnplaceable + " (asks 5 cores, 64 MiB; the largest worker offers 4 cores, 8192 MiB)"},
		{"memory", 1, 8193, nil, api.ReasonUnplaceable + " (asks 1 core, 8193 MiB; the largest worker offers 4 cores, 8192 MiB)"},
		{"gpu", 1, 64, model.ResourceAmounts{"gpu": 1}, api.ReasonUnplaceable + " (asks 1 core, 64 MiB, gpu=1; the largest worker offers 4 cores, 8192 MiB, gpu=0)"},
	} {
		if st := create(c.name, c.cores, c.memoryMB, c.res); st.Unplaceable != c.want {
			t.Errorf("create %s: unplaceable %q, want %q", c.name, st.Unplaceable, c.want)
		}
	}
	if st, err := cl.Schedule(ctx, "cores"); err != nil || !strings.HasPrefix(st.Unplaceable, api.ReasonUnplaceable) {
		t.Fatalf("status of cores: %q, %v; want it unplaceable", st.Unplaceable, err)
	}
	l, err := cl.Schedules(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range l.Schedules {
		if st.Unplaceable != "" {
			t.Fatalf("list: %s unplaceable %q; lists leave it out", st.Name, st.Unplaceable)
		}
	}
}
