package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// scheduleMaster answers the schedule endpoints as a leader would, over
// a table of its own, and records every request, so that a test can say
// that a refused command made none. Its drivers list is the plain
// fakeMaster's.
type scheduleMaster struct {
	*httptest.Server
	mu        sync.Mutex
	schedules map[string]*api.ScheduleStatus
	created   []api.ScheduleRequest
	// requests counts every request but the blobs'; queries are those
	// of GET /v1/schedules.
	requests int
	queries  []url.Values
	// running is the driver a run of a forbid schedule waits for: while
	// it is set, schedule run is refused as a leader refuses it.
	running string
	// uploads counts the files stored; reads the GETs of one schedule.
	uploads, reads int
	// readStatus, when not 0, is the status every GET of one schedule
	// is refused with.
	readStatus int
	// unplaceable is what a create answers in its Unplaceable.
	unplaceable string
}

// slotNext is the next slot the fake gives every schedule:
// 2026-12-08T01:00:00Z, 02:00 in Europe/Berlin.
const slotNext = 1796691600000

func newScheduleMaster(t *testing.T) *scheduleMaster {
	f := &scheduleMaster{schedules: map[string]*api.ScheduleStatus{}}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	// one runs h on the schedule the path names, refusing an unknown
	// name as the masters do.
	one := func(h func(w http.ResponseWriter, s *api.ScheduleStatus)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.requests++
			if r.Method == http.MethodGet {
				f.reads++
				if f.readStatus != 0 {
					reply(w, f.readStatus, api.Error{Error: "refused", Code: api.CodeForbidden})
					return
				}
			}
			s, ok := f.schedules[r.PathValue("name")]
			if !ok {
				reply(w, http.StatusNotFound, api.Error{Error: "unknown schedule: " + r.PathValue("name"), Code: api.CodeUnknownSchedule})
				return
			}
			h(w, s)
		}
	}
	mux.HandleFunc("POST /v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		var req api.ScheduleRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			reply(w, http.StatusBadRequest, api.Error{Error: err.Error(), Code: api.CodeInvalidRequest})
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests++
		f.created = append(f.created, req)
		if _, ok := f.schedules[req.Name]; ok {
			reply(w, http.StatusConflict, api.Error{Error: "schedule " + req.Name + " exists: nothing created", Code: api.CodeScheduleExists})
			return
		}
		s := &api.ScheduleStatus{Schedule: model.Schedule{Name: req.Name, Cron: req.Cron, TimeZone: req.TimeZone, Concurrency: req.Concurrency,
			StartingDeadlineMS: req.StartingDeadlineMS, History: *req.History, CreatedAt: slotNext - 86_400_000,
			Template: model.SubmitDriver{Name: req.Template.Name, DriverSpec: req.Template.DriverSpec}}, Next: slotNext, Unplaceable: f.unplaceable}
		f.schedules[req.Name] = s
		reply(w, http.StatusCreated, s)
	})
	mux.HandleFunc("GET /v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests++
		f.queries = append(f.queries, r.URL.Query())
		var l api.ScheduleList
		for _, name := range slices.Sorted(maps.Keys(f.schedules)) {
			l.Schedules = append(l.Schedules, *f.schedules[name])
		}
		reply(w, http.StatusOK, l)
	})
	mux.HandleFunc("GET /v1/schedules/{name}", one(func(w http.ResponseWriter, s *api.ScheduleStatus) { reply(w, http.StatusOK, s) }))
	mux.HandleFunc("POST /v1/schedules/{name}/suspend", one(func(w http.ResponseWriter, s *api.ScheduleStatus) {
		s.Suspended, s.Next = true, 0
		reply(w, http.StatusOK, s)
	}))
	mux.HandleFunc("POST /v1/schedules/{name}/resume", one(func(w http.ResponseWriter, s *api.ScheduleStatus) {
		s.Suspended, s.Next = false, slotNext
		reply(w, http.StatusOK, s)
	}))
	mux.HandleFunc("POST /v1/schedules/{name}/run", one(func(w http.ResponseWriter, s *api.ScheduleStatus) {
		if f.running != "" {
			reply(w, http.StatusConflict, api.Error{Error: fmt.Sprintf("schedule %s forbids a second run: %s has not ended", s.Name, f.running), Code: api.CodeConflict})
			return
		}
		id := "driver-20261207063000-0007"
		s.ManualRuns++
		s.Runs = append(s.Runs, api.ScheduleRunStatus{ScheduleRun: model.ScheduleRun{Slot: slotNext - 3_600_000, DriverID: id, Manual: true}, State: model.DriverSubmitted})
		reply(w, http.StatusCreated, api.ScheduleRunResponse{DriverID: id, Slot: slotNext - 3_600_000})
	}))
	mux.HandleFunc("DELETE /v1/schedules/{name}", one(func(w http.ResponseWriter, s *api.ScheduleStatus) {
		delete(f.schedules, s.Name)
		reply(w, http.StatusOK, s.Schedule)
	}))
	mux.HandleFunc("PUT /v1/blobs/{sum}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.uploads++
		f.mu.Unlock()
		reply(w, http.StatusOK, api.UploadResponse{SHA256: r.PathValue("sum"), Voters: 1, Held: []string{"m1"}})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// client runs drover client against the fake.
func (f *scheduleMaster) client(args ...string) (stdout, stderr string, code int) {
	return drover(append([]string{"client", "--masters", strings.TrimPrefix(f.URL, "http://")}, args...)...)
}

// schedule create sends the schedule's settings and, as its template,
// the submission submit's flags make (the same flags, read the same
// way, the --upload files stored first and named by digest), into
// --namespace; it prints the next slot in the schedule's zone and in
// UTC. Without the optional flags, the request carries the defaults
// --help shows.
func TestScheduleCreateMapsItsFlags(t *testing.T) {
	f := newScheduleMaster(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "etl.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho etl\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := f.client("--namespace", "etl", "schedule", "create", "nightly", "--cron", "0 2 * * *", "--time-zone", "Europe/Berlin",
		"--concurrency", "forbid", "--starting-deadline", "10m", "--history", "3",
		"--supervise", "--max-restarts", "2", "--restart-window", "1h", "--name", "etl-nightly", "--driver-cores", "2", "--driver-memory", "4g",
		"--driver-resource", "gpu=1", "--env", "MODE=full", "--artifact", "https://example.org/lib.tar.gz", "--upload", script,
		"--priority", "70", "--app-cores", "8", "--user", "etl",
		"--", "./etl.sh", "--full", "--masters", "x")
	if code != 0 {
		t.Fatalf("schedule create: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	want := "created schedule nightly\nnext slot: 2026-12-08 02:00:00 CET (Europe/Berlin), 2026-12-08T01:00:00.000Z\n"
	if stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	req := f.created[0]
	tpl := req.Template
	prio := 70
	if req.Name != "nightly" || req.Cron != "0 2 * * *" || req.TimeZone != "Europe/Berlin" || req.Concurrency != model.ConcurrencyForbid ||
		req.StartingDeadlineMS != 600_000 || req.History == nil || *req.History != 3 {
		t.Errorf("settings: %+v", req)
	}
	if tpl.Token != "" || tpl.Name != "etl-nightly" || tpl.Namespace != "etl" || !slices.Equal(tpl.Argv, []string{"./etl.sh", "--full", "--masters", "x"}) ||
		!tpl.Supervise || tpl.MaxRestarts != 2 || tpl.RestartWindowMS != 3_600_000 || tpl.Cores != 2 || tpl.MemoryMB != 4096 ||
		tpl.Resources["gpu"] != 1 || tpl.Env["MODE"] != "full" || tpl.Priority == nil || *tpl.Priority != prio || tpl.AppCores != 8 || tpl.User != "etl" {
		t.Errorf("template: %+v", tpl)
	}
	if len(tpl.Artifacts) != 2 || tpl.Artifacts[0].Source != "https://example.org/lib.tar.gz" || tpl.Artifacts[1].Name != "etl.sh" ||
		len(tpl.Artifacts[1].Upload) != 64 || tpl.Artifacts[1].Mode != 0o750 {
		t.Errorf("artifacts: %+v", tpl.Artifacts)
	}

	if _, stderr, code := f.client("schedule", "create", "plain", "--cron", "@every 90s", "--", "/bin/true"); code != 0 {
		t.Fatalf("schedule create plain: exit %d, %q", code, stderr)
	}
	req = f.created[1]
	if req.TimeZone != "UTC" || req.Concurrency != model.ConcurrencyAllow || req.StartingDeadlineMS != 0 || *req.History != model.DefaultHistory ||
		req.Template.Namespace != model.DefaultNamespace || req.Template.Cores != 1 || req.Template.MemoryMB != 1024 || req.Template.Priority != nil {
		t.Errorf("defaults: %+v", req)
	}
	help, _, _ := f.client("schedule", "create", "--help")
	for flag, def := range map[string]string{"time-zone": `(default "UTC")`, "concurrency": `(default "allow")`, "history": "(default 10)",
		"starting-deadline": "(default: no deadline)", "driver-cores": "(default 1)", "driver-memory": "(default 1g)"} {
		if !strings.HasSuffix(helpLine(help, flag), def) {
			t.Errorf("--help does not show --%s's default %s: %q", flag, def, helpLine(help, flag))
		}
	}
}

// Each bad input to schedule create is one line naming what is wrong,
// exit 1, and no request at all (nothing created, nothing uploaded):
// a spec that does not parse and an unknown zone with the masters' own
// lines, a deadline not positive or under the API's millisecond, a
// history out of 1..1000, a policy that is none, a bad submit flag, no
// NAME or no "--" PROGRAM. A name taken is the masters' 409 line, and
// creates nothing more.
func TestScheduleCreateRefusals(t *testing.T) {
	f := newScheduleMaster(t)
	ok := []string{"--cron", "@daily"}
	prog := []string{"--", "/bin/true"}
	for _, c := range []struct {
		args []string
		say  string
	}{
		{append([]string{"n", "--cron", "0 0 32 * *"}, prog...), `cron spec "0 0 32 * *": field 3 (day of month) "32": end of range (32) above maximum (31): 32`},
		{append([]string{"n", "--cron", "* * *"}, prog...), `cron spec "* * *" has 3 fields; want 5`},
		{append([]string{"n", "--cron", "@every 500ms"}, prog...), "@every takes a whole number of seconds, at least 1s; got 500ms"},
		{append([]string{"n", "--cron", "@daily", "--time-zone", "Mars/Olympus"}, prog...), `unknown time zone "Mars/Olympus" (an IANA name such as Europe/Berlin)`},
		{append(append([]string{"n", "--starting-deadline", "0s"}, ok...), prog...), "--starting-deadline 0s must be positive"},
		{append(append([]string{"n", "--starting-deadline", "-1m"}, ok...), prog...), "--starting-deadline -1m0s must be positive"},
		{append(append([]string{"n", "--starting-deadline", "999us"}, ok...), prog...), "--starting-deadline 999µs must be at least 1ms"},
		{append(append([]string{"n", "--starting-deadline", "1500us"}, ok...), prog...), "--starting-deadline 1.5ms is not a whole number of milliseconds"},
		{append(append([]string{"n", "--starting-deadline", "1m0.0001s"}, ok...), prog...), "--starting-deadline 1m0.0001s is not a whole number of milliseconds"},
		{append([]string{"n", "--cron", "@daily" + strings.Repeat(" ", model.MaxCronLen-5)}, prog...), "--cron of 257 bytes exceeds 256 bytes"},
		{append(append([]string{"n", "--time-zone", strings.Repeat("A", model.MaxTimeZoneLen+1)}, ok...), prog...), "--time-zone of 65 bytes exceeds 64 bytes"},
		// A zone at its bound is quoted whole; a longer input is quoted
		// as its first 64 bytes and its length.
		{append(append([]string{"n", "--time-zone", strings.Repeat("A", model.MaxTimeZoneLen)}, ok...), prog...),
			`unknown time zone "` + strings.Repeat("A", 64) + `" (an IANA name`},
		{append(append([]string{"n", "--concurrency", strings.Repeat("q", 5000)}, ok...), prog...),
			"--concurrency: a concurrency of 5000 bytes is not allow, forbid or replace"},
		{append(append([]string{"n", "--driver-cores", strings.Repeat("9", 5000)}, ok...), prog...),
			`invalid argument "` + strings.Repeat("9", 64) + `"... (5000 bytes) for "--driver-cores" flag`},
		{append(append([]string{"n", "--history", "0"}, ok...), prog...), "--history 0 must be from 1 to 1000"},
		{append(append([]string{"n", "--history", "1001"}, ok...), prog...), "--history 1001 must be from 1 to 1000"},
		{append(append([]string{"n", "--concurrency", "queue"}, ok...), prog...), `--concurrency: concurrency "queue" is not allow, forbid or replace`},
		{append(append([]string{"n", "--driver-cores", "0"}, ok...), prog...), "--driver-cores 0 must be from 1 to 65536"},
		{append(append([]string{"n", "--max-restarts", "2"}, ok...), prog...), "--max-restarts needs --supervise"},
		{append(append([]string{"n", "--upload", "/nonexistent/etl.sh"}, ok...), prog...), "--upload: stat /nonexistent/etl.sh"},
		{append(append([]string{"n", "--starting-deadline", "43800h0m0.001s"}, ok...), prog...), "--starting-deadline 43800h0m0.001s exceeds five years (43800h0m0s)"},
		// The masters' check of the program, before any file is sent.
		{append(append([]string{"n", "--env", "=x", "--upload", "/etc/hostname"}, ok...), prog...), "environment name"},
		{append(append([]string{"Nightly"}, ok...), prog...), "is not a DNS label"},
		{append([]string{"n"}, prog...), "schedule create needs --cron SPEC"},
		{append(ok, prog...), "schedule create wants exactly one NAME before --, got 0 arguments"},
		{append(append([]string{"n", "m"}, ok...), prog...), "schedule create wants exactly one NAME before --, got 2 arguments"},
		{append([]string{"n"}, ok...), "schedule create needs -- PROGRAM"},
		{[]string{"n", "--cron", "@daily", "/bin/true"}, "schedule create needs -- PROGRAM"},
		{append([]string{"n"}, append(ok, "--")...), "schedule create needs -- PROGRAM"},
	} {
		stdout, stderr, code := f.client(append([]string{"schedule", "create"}, c.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.say) || strings.Count(stderr, "\n") != 1 || len(stderr) > 300 {
			t.Errorf("schedule create %.200q: exit %d, stdout %q, stderr %.300q; want 1 and one line with %.200q", c.args, code, stdout, stderr, c.say)
		}
	}
	if f.requests != 0 {
		t.Fatalf("the refused creates made %d requests", f.requests)
	}
	// At the bounds, each is taken.
	for i, at := range [][]string{{"--starting-deadline", "1ms"}, {"--starting-deadline", "1m0.001s"}, {"--starting-deadline", "43800h"}, {"--history", "1"}, {"--history", "1000"},
		{"--cron", "@daily" + strings.Repeat(" ", model.MaxCronLen-6)}} {
		args := append(append([]string{"schedule", "create", fmt.Sprintf("at-%d", i)}, at...), append(ok, prog...)...)
		if _, stderr, code := f.client(args...); code != 0 {
			t.Errorf("%q: exit %d, %q", args, code, stderr)
		}
	}
	stdout, stderr, code := f.client(append(append([]string{"schedule", "create", "at-0"}, ok...), prog...)...)
	if code != 1 || stdout != "" || stderr != "drover: schedule at-0 exists: nothing created\n" || len(f.schedules) != 6 {
		t.Errorf("a name taken: exit %d, stdout %q, stderr %q, %d schedules", code, stdout, stderr, len(f.schedules))
	}
}

// schedule list prints a row per schedule (with its namespace under
// --all-namespaces, which it asks the masters for) and --json the array;
// schedule status prints the settings, the next and last slots, the
// counts, the last skip reason and a row per kept run with its driver's
// state; suspend, resume, run and delete say what they did, and an
// unknown name is the masters' one line.
func TestScheduleReadAndControl(t *testing.T) {
	f := newScheduleMaster(t)
	if _, stderr, code := f.client("schedule", "create", "nightly", "--cron", "0 2 * * *", "--time-zone", "Europe/Berlin", "--concurrency", "forbid",
		"--starting-deadline", "10m", "--name", "etl", "--", "./etl.sh", "--full"); code != 0 {
		t.Fatalf("create: %q", stderr)
	}
	f.mu.Lock()
	s := f.schedules["nightly"]
	s.LastSlot, s.LastFired, s.Fired, s.Missed, s.Skipped, s.DSTSkipped = slotNext-86_400_000, slotNext-86_400_000, 5, 2, 1, 1
	s.LastSkipReason = "namespace queue full: etl holds 10 queued drivers, at most 10"
	s.Runs = []api.ScheduleRunStatus{
		{ScheduleRun: model.ScheduleRun{Slot: slotNext - 2*86_400_000, DriverID: "driver-20261206010000-0001"}},
		{ScheduleRun: model.ScheduleRun{Slot: slotNext - 86_400_000, DriverID: "driver-20261207010000-0002"}, State: model.DriverFailed, Message: "exit 3"},
	}
	f.mu.Unlock()

	stdout, _, code := f.client("schedule", "list")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME CRON ZONE NEXT LAST FIRED/MISSED/SKIPPED CONCURRENCY SUSPENDED" ||
		strings.Join(strings.Fields(lines[1]), " ") != "nightly 0 2 * * * Europe/Berlin 2026-12-08T01:00:00.000Z 2026-12-07T01:00:00.000Z 5/2/1 forbid false" {
		t.Fatalf("schedule list: exit %d\n%s", code, stdout)
	}
	stdout, _, code = f.client("schedule", "list", "--all-namespaces")
	if code != 0 || !strings.HasPrefix(stdout, "NAMESPACE") || !strings.Contains(stdout, "\ndefault ") || f.queries[1].Get(api.QueryAllNamespaces) != "true" {
		t.Errorf("schedule list --all-namespaces: exit %d, query %v\n%s", code, f.queries[1], stdout)
	}
	if _, _, code = f.client("schedule", "list", "--namespace", "etl"); code != 0 || f.queries[2].Get(api.QueryNamespace) != "etl" {
		t.Errorf("schedule list --namespace etl: exit %d, query %v", code, f.queries[2])
	}
	var listed []api.ScheduleStatus
	stdout, _, code = f.client("schedule", "list", "--json")
	if err := json.Unmarshal([]byte(stdout), &listed); code != 0 || err != nil || len(listed) != 1 || listed[0].Next != slotNext || listed[0].Fired != 5 ||
		len(listed[0].Runs) != 2 || listed[0].Runs[1].State != model.DriverFailed {
		t.Fatalf("schedule list --json: exit %d, %v\n%s", code, err, stdout)
	}

	stdout, _, code = f.client("schedule", "status", "nightly")
	for _, want := range []string{
		"name:          nightly\n", "namespace:     default\n", "cron:          0 2 * * *\n", "time zone:     Europe/Berlin\n",
		"concurrency:   forbid\n", "deadline:      10m0s\n", "history:       10\n", "suspended:     false\n", "driver name:   etl\n",
		`program:       ["./etl.sh" "--full"]` + "\n",
		"next slot:     2026-12-08 02:00:00 CET (Europe/Berlin), 2026-12-08T01:00:00.000Z\n",
		"last fired:    2026-12-07 02:00:00 CET (Europe/Berlin), 2026-12-07T01:00:00.000Z\n",
		"fired:         5\n", "missed:        2\n", "skipped:       1\n",
		"last skip:     namespace queue full: etl holds 10 queued drivers, at most 10\n", "dst skipped:   1\n", "manual runs:   0\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("schedule status lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 || !regexp.MustCompile(`(?m)^  2026-12-06T01:00:00.000Z +driver-20261206010000-0001 +\(pruned\) *$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^  2026-12-07T01:00:00.000Z +driver-20261207010000-0002 +FAILED +exit 3$`).MatchString(stdout) {
		t.Errorf("schedule status runs: exit %d\n%s", code, stdout)
	}
	var st api.ScheduleStatus
	stdout, _, code = f.client("schedule", "status", "nightly", "--json")
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Name != "nightly" || st.Next != slotNext || st.DSTSkipped != 1 {
		t.Errorf("schedule status --json: exit %d, %v\n%s", code, err, stdout)
	}

	stdout, _, code = f.client("schedule", "suspend", "nightly")
	if code != 0 || stdout != "suspended schedule nightly: no slot fires until schedule resume\n" || !f.schedules["nightly"].Suspended {
		t.Errorf("schedule suspend: exit %d, %q", code, stdout)
	}
	if stdout, _, _ = f.client("schedule", "status", "nightly"); !strings.Contains(stdout, "next slot:     none: suspended\n") {
		t.Errorf("a suspended schedule's status:\n%s", stdout)
	}
	stdout, _, code = f.client("schedule", "resume", "nightly")
	if code != 0 || stdout != "resumed schedule nightly\nnext slot: 2026-12-08 02:00:00 CET (Europe/Berlin), 2026-12-08T01:00:00.000Z\n" || f.schedules["nightly"].Suspended {
		t.Errorf("schedule resume: exit %d, %q", code, stdout)
	}
	stdout, stderr, code := f.client("schedule", "run", "nightly")
	if code != 0 || stdout != "driver-20261207063000-0007\n" || stderr != "schedule nightly started driver-20261207063000-0007\n" {
		t.Errorf("schedule run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, _, _ = f.client("schedule", "status", "nightly"); !strings.Contains(stdout, "manual runs:   1\n") || !strings.Contains(stdout, " (manual)  driver-20261207063000-0007") {
		t.Errorf("a manual run's status:\n%s", stdout)
	}
	f.running = "driver-20261207063000-0007"
	stdout, stderr, code = f.client("schedule", "run", "nightly")
	if code != 1 || stdout != "" || stderr != "drover: schedule nightly forbids a second run: driver-20261207063000-0007 has not ended\n" {
		t.Errorf("a forbidden schedule run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, _, code = f.client("schedule", "delete", "nightly")
	if code != 0 || !strings.HasPrefix(stdout, "deleted schedule nightly; the drivers it started that have not ended go on") || len(f.schedules) != 0 {
		t.Errorf("schedule delete: exit %d, %q", code, stdout)
	}
	before := f.requests
	for _, cmd := range []string{"status", "suspend", "resume", "run", "delete"} {
		stdout, stderr, code := f.client("schedule", cmd, "nightly")
		if code != 1 || stdout != "" || stderr != "drover: unknown schedule: nightly\n" {
			t.Errorf("schedule %s of an unknown schedule: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
		stdout, stderr, code = f.client("schedule", cmd, "Bad_Name")
		if code != 1 || stdout != "" || !strings.Contains(stderr, "is not a DNS label") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("schedule %s Bad_Name: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
	}
	if f.requests != before+5 {
		t.Errorf("%d requests for 5 unknown names and 5 malformed ones; want 5", f.requests-before)
	}
	if stdout, _, code := f.client("schedule", "list"); code != 0 || strings.TrimSpace(stdout) != strings.Join(strings.Fields("NAME CRON ZONE NEXT LAST FIRED/MISSED/SKIPPED CONCURRENCY SUSPENDED"), "  ") {
		t.Errorf("an empty schedule list: exit %d, %q", code, stdout)
	}
	if stdout, _, code := f.client("schedule", "list", "--json"); code != 0 || stdout != "[]\n" {
		t.Errorf("an empty schedule list --json: exit %d, %q", code, stdout)
	}
}

// list --schedule NAME asks the masters for that schedule's drivers (and
// refuses a name no schedule can have before asking); status shows a
// scheduled driver's schedule and slot in UTC, and --json carries both,
// the slot in Unix ms.
func TestScheduledDrivers(t *testing.T) {
	d := &model.Driver{ID: "driver-20261207010000-0002", State: model.DriverRunning, WorkerID: "w1", Attempt: 1, Schedule: "nightly", Slot: slotNext - 86_400_000,
		DriverSpec: model.DriverSpec{Argv: []string{"./etl.sh"}, Priority: new(50)}}
	f := newFakeMaster(t, d)
	if _, stderr, code := drover("client", "--masters", f.addr(), "list", "--schedule", "nightly"); code != 0 || f.lists[0].Get(api.QuerySchedule) != "nightly" {
		t.Fatalf("list --schedule nightly: exit %d, query %v, %q", code, f.lists[0], stderr)
	}
	if _, stderr, code := drover("client", "--masters", f.addr(), "list", "--schedule", "Night_ly"); code != 1 || !strings.HasPrefix(stderr, "drover: --schedule: ") ||
		strings.Count(stderr, "\n") != 1 || len(f.lists) != 1 {
		t.Errorf("list --schedule Night_ly: exit %d, %q, %d lists", code, stderr, len(f.lists))
	}
	// Given empty, --schedule is refused, not read as no filter.
	for _, args := range [][]string{{"--schedule", ""}, {"--schedule="}} {
		if _, stderr, code := drover(append([]string{"client", "--masters", f.addr(), "list"}, args...)...); code != 1 ||
			stderr != "drover: --schedule: the schedule name is empty\n" || len(f.lists) != 1 {
			t.Errorf("list %q: exit %d, %q, %d lists", args, code, stderr, len(f.lists))
		}
	}
	stdout, _, code := drover("client", "--masters", f.addr(), "status", d.ID)
	if code != 0 || !strings.Contains(stdout, "schedule:   nightly\n") || !strings.Contains(stdout, "slot:       2026-12-07T01:00:00.000Z\n") {
		t.Errorf("status of a scheduled driver: exit %d\n%s", code, stdout)
	}
	stdout, _, code = drover("client", "--masters", f.addr(), "status", d.ID, "--json")
	if code != 0 || !strings.Contains(stdout, `"schedule": "nightly"`) || !strings.Contains(stdout, fmt.Sprintf(`"slot": %d`, slotNext-86_400_000)) {
		t.Errorf("status --json of a scheduled driver: exit %d\n%s", code, stdout)
	}
	f.drivers[0] = &model.Driver{ID: "driver-20261207010000-0003", State: model.DriverRunning, WorkerID: "w1", Attempt: 1, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Priority: new(50)}}
	if stdout, _, _ = drover("client", "--masters", f.addr(), "status", f.drivers[0].ID); strings.Contains(stdout, "schedule:") || strings.Contains(stdout, "slot:") {
		t.Errorf("a submitted driver's status names a schedule:\n%s", stdout)
	}
}

// Against a master: a schedule of every second fires, its driver names
// it and its slot in status and in list --schedule, and schedule status
// shows the run; suspended it fires no more, and a manual run starts a
// driver of its own; under forbid a second manual run while the first
// has not ended is the master's one line, exit 1; a name taken and an
// unknown name are refused with the master's lines; delete leaves the
// drivers.
func TestScheduleCommandsAgainstAMaster(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl, ctx := c.Client(), c.Context()
	run := func(args ...string) (string, string, int) {
		return drover(append([]string{"client", "--masters", c.Nodes[0].HTTP()}, args...)...)
	}
	stdout, stderr, code := run("schedule", "create", "tick", "--cron", "* * * * * *", "--name", "ticker", "--", "/bin/true")
	if code != 0 || !strings.HasPrefix(stdout, "created schedule tick\nnext slot: ") {
		t.Fatalf("schedule create: exit %d, %q, %q", code, stdout, stderr)
	}
	var st api.ScheduleStatus
	for deadline := time.Now().Add(10 * time.Second); len(st.Runs) == 0; time.Sleep(20 * time.Millisecond) {
		var err error
		if st, err = cl.Schedule(ctx, "tick"); err != nil || time.Now().After(deadline) {
			t.Fatalf("the schedule did not fire within 10s: %v, %+v", err, st)
		}
	}
	first := st.Runs[0]
	stdout, _, code = run("status", first.DriverID)
	if code != 0 || !strings.Contains(stdout, "schedule:   tick\n") || !strings.Contains(stdout, "slot:       "+fmtTime(first.Slot)+"\n") {
		t.Errorf("status of the fired driver: exit %d\n%s", code, stdout)
	}
	stdout, _, code = run("list", "--schedule", "tick", "--json")
	var ds []model.Driver
	if err := json.Unmarshal([]byte(stdout), &ds); code != 0 || err != nil || len(ds) == 0 || ds[0].ID != first.DriverID || ds[0].Schedule != "tick" || ds[0].Slot != first.Slot {
		t.Errorf("list --schedule tick --json: exit %d, %v\n%s", code, err, stdout)
	}
	if stdout, _, code = run("list", "--schedule", "other"); code != 0 || strings.Contains(stdout, "driver-") {
		t.Errorf("list --schedule other: exit %d\n%s", code, stdout)
	}
	if stdout, _, code = run("schedule", "status", "tick"); code != 0 || !strings.Contains(stdout, first.DriverID) || !strings.Contains(stdout, "driver name:   ticker\n") {
		t.Errorf("schedule status: exit %d\n%s", code, stdout)
	}

	if _, stderr, code = run("schedule", "suspend", "tick"); code != 0 {
		t.Fatalf("schedule suspend: exit %d, %q", code, stderr)
	}
	st, _ = cl.Schedule(ctx, "tick")
	stdout, _, code = run("schedule", "run", "tick")
	id := strings.TrimSpace(stdout)
	after, _ := cl.Schedule(ctx, "tick")
	if code != 0 || after.ManualRuns != 1 || after.Fired != st.Fired || !after.Runs[len(after.Runs)-1].Manual || after.Runs[len(after.Runs)-1].DriverID != id {
		t.Errorf("schedule run of the suspended schedule: exit %d, %q; %+v", code, stdout, after)
	}

	if _, stderr, code = run("schedule", "create", "once", "--cron", "@yearly", "--concurrency", "forbid", "--", "/bin/true"); code != 0 {
		t.Fatalf("schedule create once: exit %d, %q", code, stderr)
	}
	if _, stderr, code = run("schedule", "run", "once"); code != 0 {
		t.Fatalf("schedule run once: exit %d, %q", code, stderr)
	}
	stdout, stderr, code = run("schedule", "run", "once")
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "drover: schedule once: ") || !strings.HasSuffix(stderr, ": nothing started\n") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("a second run under forbid: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = run("schedule", "create", "once", "--cron", "@daily", "--", "/bin/true")
	if code != 1 || stdout != "" || stderr != "drover: schedule once exists: nothing created\n" {
		t.Errorf("a name taken: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, _, code = run("schedule", "list"); code != 0 || !regexp.MustCompile(`(?m)^once +@yearly +UTC .* 0/0/0 +forbid +false$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^tick +\* \* \* \* \* \* +UTC +- +\S+ +\d+/\d+/\d+ +allow +true$`).MatchString(stdout) {
		t.Errorf("schedule list:\n%s", stdout)
	}
	if stdout, _, code = run("schedule", "delete", "tick"); code != 0 || !strings.HasPrefix(stdout, "deleted schedule tick") {
		t.Errorf("schedule delete: exit %d, %q", code, stdout)
	}
	if _, err := cl.Driver(ctx, first.DriverID); err != nil {
		t.Errorf("the deleted schedule's driver: %v", err)
	}
	stdout, stderr, code = run("schedule", "status", "tick")
	if code != 1 || stdout != "" || stderr != "drover: unknown schedule: tick\n" {
		t.Errorf("status of a deleted schedule: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// watch prints a schedule's event as a line: whether it is suspended,
// its last accounted slot, its counts and its last skip reason.
func TestWatchPrintsScheduleEvents(t *testing.T) {
	var out strings.Builder
	k := &cli{stdout: &out}
	k.printEvent(api.Event{Index: 42, Kind: api.EventSchedule, ID: "nightly", Op: api.OpUpsert, Schedule: &model.Schedule{Name: "nightly",
		LastSlot: slotNext, Fired: 3, Missed: 1, Skipped: 2, LastSkipReason: "run driver-20261207010000-0002 has not ended (concurrency forbid)"}}, false)
	k.printEvent(api.Event{Index: 43, Kind: api.EventSchedule, ID: "nightly", Op: api.OpUpsert, Schedule: &model.Schedule{Name: "nightly", Suspended: true}}, false)
	want := "42\tschedule\tnightly\tACTIVE\tlast slot 2026-12-08T01:00:00.000Z, fired 3, missed 1, skipped 2: run driver-20261207010000-0002 has not ended (concurrency forbid)\n" +
		"43\tschedule\tnightly\tSUSPENDED\tlast slot -, fired 0, missed 0, skipped 0\n"
	if out.String() != want {
		t.Errorf("watch printed %q, want %q", out.String(), want)
	}
}

// A schedule verb given the wrong number of arguments says so in one
// line ending with its usage, and makes no request.
func TestScheduleVerbsSayTheirUsage(t *testing.T) {
	f := newScheduleMaster(t)
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"status"}, "want exactly one NAME, got 0 arguments: drover client schedule status NAME [--json]"},
		{[]string{"status", "a", "b"}, "want exactly one NAME, got 2 arguments: drover client schedule status NAME [--json]"},
		{[]string{"suspend"}, "want exactly one NAME, got 0 arguments: drover client schedule suspend NAME"},
		{[]string{"resume"}, "want exactly one NAME, got 0 arguments: drover client schedule resume NAME"},
		{[]string{"run"}, "want exactly one NAME, got 0 arguments: drover client schedule run NAME"},
		{[]string{"delete", "a", "b"}, "want exactly one NAME, got 2 arguments: drover client schedule delete NAME"},
		{[]string{"list", "x"}, `schedule list takes no arguments, got ["x"]: drover client schedule list [--all-namespaces] [--json]`},
	} {
		stdout, stderr, code := f.client(append([]string{"schedule"}, c.args...)...)
		if code != 1 || stdout != "" || stderr != "drover: "+c.say+"\n" {
			t.Errorf("schedule %q: exit %d, stdout %q, stderr %q; want 1 and %q", c.args, code, stdout, stderr, c.say)
		}
	}
	if f.requests != 0 {
		t.Errorf("the refused commands made %d requests", f.requests)
	}
}

// schedule create --upload asks the masters for the name first: a name
// taken is the masters' line, exit 1, with nothing uploaded and no
// create sent; an unknown name (404), or a read refused otherwise (403),
// goes on to upload and create. Without --upload, the create alone asks.
func TestScheduleCreateChecksTheNameBeforeUploading(t *testing.T) {
	f := newScheduleMaster(t)
	script := filepath.Join(t.TempDir(), "etl.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	create := func(name string) (string, string, int) {
		return f.client("schedule", "create", name, "--cron", "@daily", "--upload", script, "--", "./etl.sh")
	}
	if _, stderr, code := create("nightly"); code != 0 || f.reads != 1 || f.uploads != 1 || len(f.created) != 1 {
		t.Fatalf("create of a free name: exit %d, %q; %d reads, %d uploads, %d creates", code, stderr, f.reads, f.uploads, len(f.created))
	}
	stdout, stderr, code := create("nightly")
	if code != 1 || stdout != "" || stderr != "drover: schedule nightly exists: nothing created\n" || f.uploads != 1 || len(f.created) != 1 {
		t.Errorf("create of a name taken: exit %d, stdout %q, stderr %q; %d uploads, %d creates", code, stdout, stderr, f.uploads, len(f.created))
	}
	f.readStatus = http.StatusForbidden
	if _, stderr, code := create("other"); code != 0 || f.uploads != 2 || len(f.created) != 2 {
		t.Errorf("create after a refused read: exit %d, %q; %d uploads, %d creates", code, stderr, f.uploads, len(f.created))
	}
	reads := f.reads
	if _, stderr, code := f.client("schedule", "create", "plain", "--cron", "@daily", "--", "/bin/true"); code != 0 || f.reads != reads {
		t.Errorf("create without --upload: exit %d, %q; %d reads", code, stderr, f.reads-reads)
	}
}

// After a create that the masters answer unplaceable (no ALIVE worker
// could hold its driver, as submit's exit 3), one warning line on
// stderr says so with the masters' reason; the exit stays 0 and the
// schedule exists. No warning otherwise. status shows the reason too.
func TestScheduleCreateWarnsOfAnUnplaceableDriver(t *testing.T) {
	f := newScheduleMaster(t)
	why := api.ReasonUnplaceable + " (asks 5 cores, 1024 MiB; the largest worker offers 4 cores, 8192 MiB)"
	for _, c := range []struct{ name, unplaceable, warn string }{
		{"fits", "", ""},
		{"big", why, "drover: warning: schedule big's driver " + why + ": each run waits until a worker that fits registers\n"},
	} {
		f.unplaceable = c.unplaceable
		stdout, stderr, code := f.client("schedule", "create", c.name, "--cron", "@daily", "--driver-cores", "5", "--", "/bin/true")
		if code != 0 || !strings.HasPrefix(stdout, "created schedule "+c.name+"\n") || stderr != c.warn || f.schedules[c.name] == nil {
			t.Errorf("create %s: exit %d, stdout %q, stderr %q; want 0 and stderr %q", c.name, code, stdout, stderr, c.warn)
		}
	}
	stdout, _, code := f.client("schedule", "status", "big")
	if code != 0 || !strings.Contains(stdout, "\nunplaceable:   "+why+"\n") {
		t.Errorf("status big: exit %d, %q; want the unplaceable line", code, stdout)
	}
	if stdout, _, _ := f.client("schedule", "status", "fits"); strings.Contains(stdout, "unplaceable") {
		t.Errorf("status fits: %q; want no unplaceable line", stdout)
	}
}
