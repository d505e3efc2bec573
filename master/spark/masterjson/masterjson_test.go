package masterjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// t0 is 2026-01-01T00:00:00Z in Unix milliseconds.
const t0 = 1767225600000

func testState() *api.State {
	exit := 0
	return &api.State{
		ID: "m1", Role: "Leader",
		Workers: []*model.Worker{
			{ID: "w1", HTTPAddr: "10.0.0.11:7402", Cores: 4, CoresUsed: 3, MemoryMB: 4096, MemoryUsedMB: 1536, State: model.WorkerAlive, RegisteredAt: t0, UpdatedAt: t0 + 5000},
			{ID: "w2", HTTPAddr: "10.0.0.12:7402", Cores: 8, MemoryMB: 8192, State: model.WorkerDead, RegisteredAt: t0, UpdatedAt: t0 + 9000},
		},
		Drivers: []*model.Driver{
			{ID: "driver-20260101000000-0000", Name: "etl", DriverSpec: model.DriverSpec{Argv: []string{"/opt/etl"}, Cores: 1, MemoryMB: 512}, State: model.DriverRunning, WorkerID: "w1", SubmittedAt: t0},
			{ID: "driver-20260101000000-0001", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "9"}, Cores: 2, MemoryMB: 1024}, State: model.DriverSubmitted, SubmittedAt: t0 + 1000},
			{ID: "driver-20260101000000-0002", DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}, State: model.DriverFinished, WorkerID: "w2", ExitCode: &exit, SubmittedAt: t0 + 2000},
		},
		WaitingDrivers: []string{"driver-20260101000000-0001"},
		Apps: []api.AppStatus{
			{App: &model.App{ID: "app-20260101000000-0000", Name: "wordcount", ExecutorSpec: model.ExecutorSpec{User: "etl", MemoryPerExecutorMB: 512}, CoresGranted: 2, State: model.AppRunning, SubmittedAt: t0}},
			{App: &model.App{ID: "app-20260101000000-0001", State: model.AppFinished, ExecutorSpec: model.ExecutorSpec{MemoryPerExecutorMB: 256}, SubmittedAt: t0, EndedAt: t0 + 60000}},
		},
	}
}

var site = Site{URL: "spark://10.0.0.1:6066", Scheme: "https"}

// keysInOrder returns the keys of a JSON object as they come.
func keysInOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func render(t *testing.T, st *api.State, field string) []byte {
	t.Helper()
	v, err := site.Render(st, time.UnixMilli(t0+90000), field)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The document has Spark's fields in writeMasterState's order, and each
// row the fields of Spark's WorkerInfo, ApplicationInfo and DriverInfo.
func TestSparkShapes(t *testing.T) {
	b := render(t, testState(), "")
	want := []string{"url", "workers", "aliveworkers", "cores", "coresused", "memory", "memoryused", "resources", "resourcesused",
		"activeapps", "completedapps", "activedrivers", "completeddrivers", "status"}
	if got := keysInOrder(t, b); !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	var doc struct {
		Workers, ActiveApps, ActiveDrivers []json.RawMessage
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		raw  json.RawMessage
		want []string
	}{
		{"worker", doc.Workers[0], []string{"id", "host", "port", "webuiaddress", "cores", "coresused", "coresfree", "memory", "memoryused",
			"memoryfree", "resources", "resourcesused", "resourcesfree", "state", "lastheartbeat"}},
		{"app", doc.ActiveApps[0], []string{"id", "starttime", "name", "cores", "user", "memoryperexecutor", "memoryperslave",
			"resourcesperexecutor", "resourcesperslave", "submitdate", "state", "duration"}},
		{"driver", doc.ActiveDrivers[0], []string{"id", "starttime", "state", "cores", "memory", "resources", "submitdate", "worker", "mainclass"}},
	} {
		if got := keysInOrder(t, c.raw); !slices.Equal(got, c.want) {
			t.Errorf("%s fields %v, want %v", c.name, got, c.want)
		}
	}
}

// Drover's rows in Spark's terms: totals over ALIVE workers, rows split
// into active and completed, the leader ALIVE and a follower STANDBY.
func TestMapping(t *testing.T) {
	st := testState()
	v, err := site.Render(st, time.UnixMilli(t0+90000), "")
	if err != nil {
		t.Fatal(err)
	}
	m := v.(Master)
	if m.URL != site.URL || m.AliveWorkers != 1 || m.Cores != 4 || m.CoresUsed != 3 || m.Memory != 4096 || m.MemoryUsed != 1536 ||
		len(m.Resources) != 1 || len(m.ResourcesUsed) != 1 || m.Status != "ALIVE" {
		t.Fatalf("master %+v", m)
	}
	w := m.Workers[0]
	if w.ID != "w1" || w.Host != "10.0.0.11" || w.Port != 7402 || w.WebUIAddress != "https://10.0.0.11:7402" ||
		w.Cores != 4 || w.CoresUsed != 3 || w.CoresFree != 1 || w.Memory != 4096 || w.MemoryUsed != 1536 || w.MemoryFree != 2560 ||
		w.State != "ALIVE" || w.LastHeartbeat != t0+5000 || len(m.Workers) != 2 || m.Workers[1].State != "DEAD" {
		t.Fatalf("workers %+v", m.Workers)
	}
	if len(m.ActiveDrivers) != 2 || len(m.CompletedDrivers) != 1 {
		t.Fatalf("drivers: %d active, %d completed", len(m.ActiveDrivers), len(m.CompletedDrivers))
	}
	running, waiting, done := m.ActiveDrivers[0], m.ActiveDrivers[1], m.CompletedDrivers[0]
	if running.MainClass != "etl" || running.Worker != "w1" || running.StartTime != "1767225600000" ||
		running.SubmitDate != "Thu Jan 01 00:00:00 UTC 2026" || running.Memory != 512 {
		t.Fatalf("running driver %+v", running)
	}
	if waiting.Worker != "None" || waiting.MainClass != "/bin/sleep" || waiting.State != "SUBMITTED" {
		t.Fatalf("waiting driver %+v", waiting)
	}
	if done.Worker != "w2" || done.State != "FINISHED" {
		t.Fatalf("finished driver %+v", done)
	}
	if len(m.ActiveApps) != 1 || len(m.CompletedApps) != 1 ||
		m.ActiveApps[0].Duration != 90000 || m.ActiveApps[0].Cores != 2 || m.ActiveApps[0].MemoryPerSlave != 512 || m.ActiveApps[0].User != "etl" ||
		m.CompletedApps[0].Duration != 60000 || m.CompletedApps[0].State != "FINISHED" || m.CompletedApps[0].User != "" {
		t.Fatalf("apps %+v %+v", m.ActiveApps, m.CompletedApps)
	}

	st.Role = "Follower"
	if got := string(render(t, st, "status")); got != `{"status":"STANDBY"}` {
		t.Fatalf("/json/status on a follower: %s", got)
	}
}

// /json/FIELD answers that field alone; clusterutilization is Spark's
// utilization document; any other name is refused, naming the fields.
func TestFields(t *testing.T) {
	st := testState()
	for field, want := range map[string]string{
		"aliveworkers":       `{"aliveworkers":1}`,
		"url":                `{"url":"spark://10.0.0.1:6066"}`,
		"resources":          `{"resources":[{}]}`,
		"clusterutilization": `{"waitingDrivers":1,"cores":4,"coresused":3,"coresutilization":75,"memory":4096,"memoryused":1536,"memoryutilization":37}`,
	} {
		if got := string(render(t, st, field)); got != want {
			t.Errorf("/json/%s: %s, want %s", field, got, want)
		}
	}
	empty := &api.State{Role: "Leader"}
	if got := string(render(t, empty, "clusterutilization")); got != `{"waitingDrivers":0,"cores":0,"coresused":0,"coresutilization":100,"memory":0,"memoryused":0,"memoryutilization":100}` {
		t.Errorf("utilization of no worker: %s", got)
	}
	if got := render(t, empty, ""); !bytes.Contains(got, []byte(`"workers":[],`)) || !bytes.Contains(got, []byte(`"activedrivers":[],`)) {
		t.Errorf("empty lists must be [], not null: %s", got)
	}
	for _, field := range []string{"Cores", "nope", "workers2"} {
		_, err := site.Render(st, time.Now(), field)
		if code, _ := api.CodeOf(err); code != api.CodeNotFound || !errors.Is(err, api.ErrNotFound) {
			t.Errorf("/json/%s: %v, want not found", field, err)
		}
	}
}
