package fsm

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/drover-project/drover/model"
)

// sameString reports whether a and b are one copy in memory, not merely
// equal.
func sameString(a, b string) bool {
	return a == b && unsafe.StringData(a) == unsafe.StringData(b)
}

// sameMap reports whether a and b are one map.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// sharingLog submits three drivers in entries of their own, the first two
// with the same program, the third with an argv that differs in one
// element, then places and runs them all on one worker.
func sharingLog(t *testing.T) [][]byte {
	b := &logBuilder{t: t}
	b.add(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 8, MemoryMB: 8192, Time: 1})
	argv := []string{"/opt/spark/bin/spark-class", "org.example.Job", "--day", "2026-12-01"}
	for i := range 3 {
		a := argv
		if i == 2 {
			a = []string{argv[0], argv[1], argv[2], "2026-12-02"}
		}
		b.add(&model.SubmitDriver{
			ID: driverID(i + 1), Token: fmt.Sprint("token-", i), Name: "etl", DriverSpec: model.DriverSpec{
				Argv:     a,
				Env:      map[string]string{"SPARK_HOME": "/opt/spark", "RUN": "1"},
				Cores:    1,
				MemoryMB: 1,
			},
			Time: 10,
		})
	}
	var ps []model.Placement
	var rs []model.AttemptReport
	for i := range 3 {
		ps = append(ps, model.Placement{DriverID: driverID(i + 1), Attempt: 1, WorkerID: "w1"})
		rs = append(rs, model.AttemptReport{DriverID: driverID(i + 1), Attempt: 1, State: model.DriverRunning, Runs: 1})
	}
	b.add(&model.PlaceDrivers{Placements: ps, Time: 20})
	b.add(&model.ReportAttempts{WorkerID: "w1", Reports: rs, Time: 30})
	return b.entries
}

// checkSharing checks that the rows of sharingLog's drivers share what
// they have in common: one argv and one environment for the first two,
// the equal argv elements of the third, the name, the worker's ID and
// the state's constant.
func checkSharing(t *testing.T, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	d1, d2, d3 := f.t.Drivers[driverID(1)], f.t.Drivers[driverID(2)], f.t.Drivers[driverID(3)]
	w := f.t.Workers["w1"]
	if &d1.Argv[0] != &d2.Argv[0] || !sameMap(d1.Env, d2.Env) || !sameMap(d1.Env, d3.Env) {
		t.Errorf("drivers with the same program hold copies of it: argv %p %p, env %v %v", d1.Argv, d2.Argv, d1.Env, d2.Env)
	}
	for i := range 3 {
		if !sameString(d1.Argv[i], d3.Argv[i]) {
			t.Errorf("argv element %d %q is not shared", i, d3.Argv[i])
		}
	}
	if d3.Argv[3] != "2026-12-02" || d1.Argv[3] != "2026-12-01" {
		t.Errorf("argvs %q and %q: the one that differs must keep its own element", d1.Argv, d3.Argv)
	}
	for _, d := range []*model.Driver{d1, d2, d3} {
		rec := d.CurrentAttempt()
		if !sameString(d.Name, d1.Name) || !sameString(d.WorkerID, w.ID) || !sameString(rec.WorkerID, w.ID) ||
			!sameString(string(d.State), string(model.DriverRunning)) || !sameString(string(rec.State), string(model.DriverRunning)) {
			t.Errorf("driver %s holds copies of its name, worker ID or state: %+v", d.ID, d)
		}
	}
}

// Rows share the programs, names, worker IDs and states they have in
// common, whether Apply made them or a snapshot restored them, and a copy
// of a row a reader gets (Driver.Clone) shares nothing it could change.
func TestRowsShareWhatTheyHaveInCommon(t *testing.T) {
	f := replay(t, sharingLog(t))
	checkSharing(t, f)
	g := snapshotRestore(t, f)
	checkSharing(t, g)
	if hashOf(t, f) != hashOf(t, g) {
		t.Fatal("the restored tables differ")
	}
	g.mu.RLock()
	for tok, id := range g.t.Tokens {
		d := g.t.Drivers[id]
		if !sameString(id, d.ID) || !sameString(tok, d.Token) {
			t.Errorf("token index %q -> %q holds copies of the row's token and ID", tok, id)
		}
	}
	g.mu.RUnlock()

	d1, _ := f.State().Driver(driverID(1))
	c := d1.Clone()
	c.Argv[0], c.Env["RUN"] = "changed", "changed"
	if d, _ := f.State().Driver(driverID(2)); d.Argv[0] != "/opt/spark/bin/spark-class" || d.Env["RUN"] != "1" {
		t.Fatalf("changing a copy of a row changed another row: %+v", d)
	}
}

// The interner's caches stay bounded however many distinct values pass,
// and a value in use all along stays one copy across their generations.
func TestInternerIsBounded(t *testing.T) {
	var in interner
	hot := in.str("spark-class")
	hotArgv := in.argv([]string{"spark-class", "job"})
	for i := range 5 * internEntries {
		s := fmt.Sprint("value-", i)
		in.str(s)
		in.argv([]string{"spark-class", s})
		in.env(map[string]string{"K": s})
		if i%100 == 0 {
			if got := in.str("spark-class"); !sameString(got, hot) {
				t.Fatalf("after %d values the hot string is a new copy", i)
			}
			if got := in.argv([]string{"spark-class", "job"}); &got[0] != &hotArgv[0] {
				t.Fatalf("after %d values the hot argv is a new copy", i)
			}
		}
	}
	if n := len(in.strs.cur) + len(in.strs.old); n > 2*internEntries {
		t.Errorf("the string cache holds %d values", n)
	}
	if n := len(in.argvs.cur) + len(in.argvs.old); n > 2*internEntries {
		t.Errorf("the argv cache holds %d values", n)
	}
	if n := len(in.envs.cur) + len(in.envs.old); n > 2*internEntries {
		t.Errorf("the environment cache holds %d values", n)
	}
	big := string(make([]byte, internBytes/4))
	for i := range 20 {
		in.str(big + fmt.Sprint(i))
	}
	if in.strs.bytes > internBytes {
		t.Errorf("the string cache's generation holds %d bytes", in.strs.bytes)
	}
	if n := len(in.strs.cur) + len(in.strs.old); n > 8 {
		t.Errorf("the string cache holds %d values of %d bytes", n, len(big))
	}
}

// Environments are one key whatever order their entries come in, and two
// that differ in a value are not.
func TestInternedEnvironmentsByContent(t *testing.T) {
	var in interner
	a := in.env(map[string]string{"A": "1", "B": "2", "C": "3"})
	b := in.env(map[string]string{"C": "3", "A": "1", "B": "2"})
	c := in.env(map[string]string{"A": "1", "B": "2", "C": "4"})
	d := in.env(map[string]string{"A": "1", "B": "23"})
	if !sameMap(a, b) || sameMap(a, c) || c["C"] != "4" || d["B"] != "23" || len(d) != 2 {
		t.Fatalf("environments interned wrongly: %v %v %v %v", a, b, c, d)
	}
	if got := in.argv([]string{"ab", "c"}); len(got) != 2 || got[0] != "ab" {
		t.Fatal(got)
	}
	if got := in.argv([]string{"a", "bc"}); len(got) != 2 || got[0] != "a" || got[1] != "bc" {
		t.Fatalf("argvs that join alike are told apart: %q", got)
	}
	if in.env(nil) != nil || in.argv(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}

// A value cached under the hash of another (two that collide) is never
// handed out for it: the contents are compared.
func TestInternedHashesAreChecked(t *testing.T) {
	var in interner
	argv := in.argv([]string{"spark-class", "job"})
	env := in.env(map[string]string{"K": "1"})
	for k := range in.argvs.cur {
		in.argvs.cur[k] = []string{"other", "argv"}
	}
	for k := range in.envs.cur {
		in.envs.cur[k] = map[string]string{"K": "2"}
	}
	if got := in.argv([]string{"spark-class", "job"}); got[0] != "spark-class" || got[1] != "job" || len(got) != 2 {
		t.Fatalf("argv %q, want %q", got, argv)
	}
	if got := in.env(map[string]string{"K": "1"}); got["K"] != "1" || len(got) != 1 {
		t.Fatalf("environment %v, want %v", got, env)
	}
}
