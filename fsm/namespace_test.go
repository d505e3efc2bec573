package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/drover-project/drover/model"
)

// recountUse is every namespace's use worked out from the rows alone, as
// the derived nsUsage must hold it.
func recountUse(f *FSM) map[string]NamespaceUse {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string]NamespaceUse{}
	add := func(c *nsCharge) {
		if c == nil {
			return
		}
		u := out[c.ns]
		u.add(&c.u, 1)
		out[c.ns] = u
	}
	for _, d := range f.t.Drivers {
		add(driverCharge(d))
	}
	for _, a := range f.t.Apps {
		add(appCharge(a, f.t.Drivers[a.DriverID]))
	}
	for _, e := range f.t.Executors {
		ns := ""
		if a := f.t.Apps[e.AppID]; a != nil {
			ns = a.Namespace
		}
		add(executorCharge(e, ns))
	}
	return out
}

// TestRandomLogsKeepQuotas applies random logs of namespaces, tokens,
// submissions, placements, reports, kills, worker losses, apps,
// executors and preemption notices and ends, and checks after every
// entry that each namespace's use is what its rows add up to, that no
// entry took a namespace's use of any resource its quota bounds past
// that quota (a lowered quota may be passed already: then the use does
// not grow) and that a supervised driver whose attempt under notice ends
// goes back to the queue with no failed run counted; and at the end that
// a snapshot restores the same namespaces, tokens and use.
func TestRandomLogsKeepQuotas(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := New()
		apply := applier(rt, f)
		workers := []string{"w1", "w2", "w3"}
		for _, w := range workers {
			apply(&model.RegisterWorker{ID: w, HTTPAddr: "h:1", Cores: 4, MemoryMB: 4096,
				Resources: model.Resources{"gpu": {"0", "1"}}})
		}
		names := []string{"default", "a", "b", "c"}
		seq, appSeq, tokSeq := 0, 0, 0
		var drivers, apps, accessors []string
		pick := func(list []string, label string) string {
			if len(list) == 0 {
				return "none"
			}
			return rapid.SampledFrom(list).Draw(rt, label)
		}
		n := rapid.IntRange(1, 150).Draw(rt, "n")
		for i := range n {
			before := f.State().NamespaceUses()
			now := int64(i + 10)
			switch cmd := rapid.IntRange(0, 15).Draw(rt, "cmd"); cmd {
			case 0:
				q := model.Quota{
					Cores:          rapid.IntRange(0, 6).Draw(rt, "qc"),
					MemoryMB:       int64(rapid.IntRange(0, 4).Draw(rt, "qm")) * 1024,
					RunningDrivers: rapid.IntRange(0, 3).Draw(rt, "qr"),
				}
				if g := rapid.IntRange(0, 2).Draw(rt, "qg"); g > 0 {
					q.Resources = model.ResourceAmounts{"gpu": g}
				}
				apply(&model.ApplyNamespace{Namespace: model.Namespace{Name: pick(names, "ns"), Quota: q,
					MaxQueuedDrivers: rapid.IntRange(0, 4).Draw(rt, "mq"), Weight: 1, DriverShare: 0.5, PriorityMax: 100}, Time: now})
			case 1:
				apply(&model.DeleteNamespace{Name: pick(names, "dns"), Time: now})
			case 2, 3:
				var res model.ResourceAmounts
				if rapid.IntRange(0, 3).Draw(rt, "gpu") == 3 {
					res = model.ResourceAmounts{"gpu": 1}
				}
				id := driverID(seq)
				seq++
				ns := pick(append(names, "nope"), "sns")
				sup, restarts := rapid.Bool().Draw(rt, "sup"), 0
				if sup {
					restarts = rapid.IntRange(0, 3).Draw(rt, "mr")
				}
				apply(&model.SubmitDriver{ID: id, Token: id, DriverSpec: model.DriverSpec{Argv: []string{"p"}, Cores: rapid.IntRange(1, 3).Draw(rt, "dc"),
					MemoryMB: int64(rapid.IntRange(1, 4).Draw(rt, "dm")) * 512, Resources: res, Namespace: ns, Supervise: sup, MaxRestarts: restarts}, Time: now})
				drivers = append(drivers, id)
			case 4, 5, 6:
				// The leader's plan may be wrong: placements of any
				// waiting driver on any worker, several in one entry.
				var ps []model.Placement
				for _, d := range f.State().WaitingDrivers() {
					if rapid.Bool().Draw(rt, "place") {
						w, _ := f.State().Worker(pick(workers, "pw"))
						held, _ := d.Resources.Pick(w.ResourcesFree())
						ps = append(ps, model.Placement{DriverID: d.ID, Attempt: d.Attempt, WorkerID: w.ID, Resources: held})
					}
				}
				apply(&model.PlaceDrivers{Placements: ps, Time: now})
			case 7:
				id := pick(drivers, "rd")
				d, ok := f.State().Driver(id)
				if !ok || d.WorkerID == "" {
					continue
				}
				state := rapid.SampledFrom([]model.DriverState{model.DriverRunning, model.DriverFinished, model.DriverFailed}).Draw(rt, "rs")
				apply(&model.ReportAttempts{WorkerID: d.WorkerID, Time: now, Reports: []model.AttemptReport{{DriverID: id, Attempt: d.Attempt, State: state, ExitCode: intp(1)}}})
			case 8:
				apply(&model.KillDriver{DriverID: pick(drivers, "kd"), Time: now})
			case 9:
				w := pick(workers, "lw")
				apply(&model.WorkerLost{WorkerID: w, Time: now})
				apply(&model.RegisterWorker{ID: w, HTTPAddr: "h:1", Cores: 4, MemoryMB: 4096, Resources: model.Resources{"gpu": {"0", "1"}}, Time: now})
			case 10:
				id := fmt.Sprintf("app-20261129120000-%04d", appSeq)
				appSeq++
				c := &model.RegisterApp{ID: id, Token: id, CoresPerExecutor: rapid.IntRange(1, 2).Draw(rt, "ec"), MemoryPerExecutorMB: 512,
					ExecutorLimit: -1, Argv: []string{"e"}, Namespace: pick(names, "ans"), Time: now}
				if rapid.Bool().Draw(rt, "gpuExec") {
					c.ResourcesPerExecutor = model.ResourceAmounts{"gpu": 1}
				}
				if d, ok := f.State().Driver(pick(drivers, "ad")); ok && d.WorkerID != "" && !d.State.Terminal() {
					c.DriverID, c.DriverAttempt = d.ID, d.Attempt
				}
				apply(c)
				apps = append(apps, id)
			case 11:
				var ps []model.ExecutorPlacement
				next := map[string]int{}
				for j := rapid.IntRange(1, 4).Draw(rt, "nep"); j > 0; j-- {
					a, _, ok := f.State().App(pick(apps, "pa"))
					if !ok {
						continue
					}
					if _, ok := next[a.ID]; !ok {
						next[a.ID] = a.NextExecutorID
					}
					w, _ := f.State().Worker(pick(workers, "ew"))
					held, _ := a.ResourcesPerExecutor.Pick(w.ResourcesFree())
					ps = append(ps, model.ExecutorPlacement{AppID: a.ID, ExecutorID: next[a.ID], WorkerID: w.ID, Resources: held})
					next[a.ID]++
				}
				apply(&model.PlaceExecutors{Placements: ps, Time: now})
			case 12:
				a, execs, ok := f.State().App(pick(apps, "ka"))
				if !ok || len(execs) == 0 {
					continue
				}
				e := rapid.SampledFrom(execs).Draw(rt, "ke")
				apply(&model.ReportAttempts{WorkerID: e.WorkerID, Time: now, Reports: []model.AttemptReport{},
					Executors: []model.ExecutorReport{{AppID: a.ID, ExecutorID: e.ID, State: model.ExecExited, ExitCode: intp(0)}}})
			case 13:
				if len(accessors) > 0 && rapid.Bool().Draw(rt, "revoke") {
					apply(&model.RevokeACLToken{Accessor: pick(accessors, "ra"), Time: now})
					continue
				}
				tokSeq++
				sum := sha256.Sum256([]byte{byte(tokSeq), byte(tokSeq >> 8)})
				acc := fmt.Sprintf("acc-%d", tokSeq)
				if apply(&model.CreateACLToken{Token: model.ACLToken{Accessor: acc, SecretHash: hex.EncodeToString(sum[:]), Policy: model.PolicyRead,
					Namespaces: []string{pick(names, "tns")}}, Time: now}) == nil {
					accessors = append(accessors, acc)
				}
			case 14, 15:
				// The leader's round may be wrong too: notices for any
				// namespace, of any running unit or one just gone, ends
				// of units under notice or not.
				end := cmd == 15
				var items []model.Preemption
				for _, u := range f.State().Units() {
					if rapid.Bool().Draw(rt, "pu") {
						it := u.Ref
						if !end {
							it.By = pick(names, "pby")
						}
						items = append(items, it)
					}
				}
				if len(items) == 0 {
					continue
				}
				type run struct {
					attempt  int
					failures []int64
				}
				noticed := map[string]run{}
				for _, it := range items {
					if d, ok := f.State().Driver(it.DriverID); ok && end && d.Supervise && d.Attempt == it.Attempt {
						if rec := d.CurrentAttempt(); rec != nil && rec.PreemptedBy != "" {
							noticed[d.ID] = run{d.Attempt, d.FailuresBefore(d.Attempt + 1)}
						}
					}
				}
				apply(&model.PreemptAttempts{Items: items, End: end, Deadline: now + int64(rapid.IntRange(0, 5).Draw(rt, "pdl")), Time: now})
				for id, was := range noticed {
					d, _ := f.State().Driver(id)
					if d.State != model.DriverRelaunching || d.Attempt != was.attempt+1 || !slices.Equal(d.FailuresBefore(d.Attempt+1), was.failures) {
						rt.Fatalf("entry %d: preempted supervised driver %s is %s at attempt %d with failures %v, want RELAUNCHING at %d with %v",
							f.Index(), id, d.State, d.Attempt, d.FailuresBefore(d.Attempt+1), was.attempt+1, was.failures)
					}
				}
			}
			got, want := f.State().NamespaceUses(), recountUse(f)
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("entry %d: the kept use %+v is not the rows' %+v", f.Index(), got, want)
			}
			for _, ns := range f.State().Namespaces() {
				u, was := got[ns.Name], before[ns.Name]
				q := ns.Quota
				over := func(what string, after, prior, quota int64) {
					if quota > 0 && after > quota && after > prior {
						rt.Fatalf("entry %d: namespace %s's %s went from %d to %d, past its quota %d", f.Index(), ns.Name, what, prior, after, quota)
					}
				}
				over("cores", int64(u.Cores), int64(was.Cores), int64(q.Cores))
				over("memory", u.MemoryMB, was.MemoryMB, q.MemoryMB)
				over("running drivers", int64(u.RunningDrivers), int64(was.RunningDrivers), int64(q.RunningDrivers))
				over("gpu", int64(u.Resources["gpu"]), int64(was.Resources["gpu"]), int64(q.Resources["gpu"]))
			}
		}
		g := snapshotRestore(rt, f)
		if a, b := hashOf(rt, f), hashOf(rt, g); a != b {
			rt.Fatalf("the restored tables differ: %s vs %s", a, b)
		}
		if a, b := f.State().Namespaces(), g.State().Namespaces(); !reflect.DeepEqual(a, b) {
			rt.Fatalf("namespaces %+v restored as %+v", a, b)
		}
		if a, b := f.State().ACLTokens(), g.State().ACLTokens(); !reflect.DeepEqual(a, b) {
			rt.Fatalf("ACL tokens %+v restored as %+v", a, b)
		}
		if a, b := f.State().NamespaceUses(), g.State().NamespaceUses(); !reflect.DeepEqual(a, b) {
			rt.Fatalf("namespace use %+v restored as %+v", a, b)
		}
		for _, acc := range accessors {
			if tok, ok := f.State().ACLTokenBySecretHash(hashOfAccessor(f, acc)); ok != slices.ContainsFunc(g.State().ACLTokens(), func(t *model.ACLToken) bool { return t.Accessor == acc }) {
				rt.Fatalf("token %s (%v) is found by its hash in one FSM and not the other", acc, tok)
			}
		}
	})
}

// hashOfAccessor returns the secret's hash an accessor's row holds, ""
// for none.
func hashOfAccessor(f *FSM, acc string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if t, ok := f.t.ACLTokens[acc]; ok {
		return t.SecretHash
	}
	return ""
}

// Bad namespace and token commands are refused, one line each, and
// change nothing.
func TestNamespaceCommandsRefuseBadInput(t *testing.T) {
	f := New()
	apply := applier(t, f)
	ok := model.Namespace{Name: "etl", Weight: 1, DriverShare: 0.5, PriorityMax: 100}
	if err := apply(&model.ApplyNamespace{Namespace: ok, Time: 1}); err != nil {
		t.Fatal(err)
	}
	busy := model.SubmitDriver{ID: driverID(0), Token: "t0", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 1, Namespace: "etl"}, Time: 2}
	if _, isErr := apply(&busy).(error); isErr {
		t.Fatal("submission refused")
	}
	hash := hashOf(t, f)
	bad := func(mod func(*model.Namespace)) *model.ApplyNamespace {
		n := ok
		n.Name = "new"
		mod(&n)
		return &model.ApplyNamespace{Namespace: n, Time: 3}
	}
	sum := sha256.Sum256([]byte("x"))
	hex64 := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		c    model.Command
		want error
	}{
		{bad(func(n *model.Namespace) { n.Name = "Bad_Name" }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.Name = "-x" }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.Quota.Cores = -1 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.Quota.MemoryMB = -1 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.Quota.Resources = model.ResourceAmounts{"gpu": 0} }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.Weight = 0 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.Weight = 2e6 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.DriverShare = 1.5 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.DriverShare = 0 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.PriorityMax = 101 }), model.ErrInvalidCommand},
		{bad(func(n *model.Namespace) { n.MaxQueuedDrivers = -1 }), model.ErrInvalidCommand},
		{&model.DeleteNamespace{Name: "etl", Time: 3}, model.ErrNamespaceInUse},
		{&model.DeleteNamespace{Name: "nope", Time: 3}, model.ErrUnknownNamespace},
		{&model.DeleteNamespace{Name: "default", Time: 3}, model.ErrInvalidCommand},
		{&model.CreateACLToken{Token: model.ACLToken{Accessor: "a", SecretHash: hex64, Policy: model.PolicyRead, Namespaces: []string{"nope"}}, Time: 3}, model.ErrUnknownNamespace},
		{&model.CreateACLToken{Token: model.ACLToken{Accessor: "a", SecretHash: "xyz", Policy: model.PolicyRead, Namespaces: []string{"etl"}}, Time: 3}, model.ErrInvalidCommand},
		{&model.CreateACLToken{Token: model.ACLToken{Accessor: "a", SecretHash: hex64, Policy: "admin", Namespaces: []string{"etl"}}, Time: 3}, model.ErrInvalidCommand},
		{&model.CreateACLToken{Token: model.ACLToken{Accessor: "a", SecretHash: hex64, Policy: model.PolicyRead}, Time: 3}, model.ErrInvalidCommand},
		{&model.CreateACLToken{Token: model.ACLToken{Accessor: "a", SecretHash: hex64, Policy: model.PolicyRead, Namespaces: []string{"etl", "etl"}}, Time: 3}, model.ErrInvalidCommand},
		{&model.RevokeACLToken{Accessor: "nope", Time: 3}, model.ErrUnknownToken},
		{&model.SubmitDriver{ID: driverID(1), Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 1, Namespace: "nope"}, Time: 3}, model.ErrUnknownNamespace},
		{&model.SubmitDriver{ID: driverID(1), Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 1, Priority: intp(101)}, Time: 3}, model.ErrInvalidCommand},
	} {
		res := apply(tc.c)
		var err error
		switch r := res.(type) {
		case error:
			err = r
		case SubmitResult:
			t.Fatalf("%T %+v applied", tc.c, tc.c)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%T %+v: %v, want %v", tc.c, tc.c, err, tc.want)
		}
		if h := hashOf(t, f); h != hash {
			t.Fatalf("%T %+v changed the tables", tc.c, tc.c)
		}
	}
}

// The queue bound counts the submissions earlier in the same entry, and
// a priority above the namespace's highest is refused while one at it
// is taken.
func TestMaxQueuedDriversCountsTheEntry(t *testing.T) {
	f := New()
	data, _ := Encode(&model.ApplyNamespace{Namespace: model.Namespace{Name: "etl", MaxQueuedDrivers: 2, Weight: 1, DriverShare: 0.5, PriorityMax: 60}, Time: 1})
	f.ApplyCommand(1, data)
	var c model.SubmitDrivers
	for i := range 3 {
		c.Drivers = append(c.Drivers, model.SubmitDriver{ID: driverID(i), Token: driverID(i), DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 1, Namespace: "etl", Priority: intp(60)}, Time: 2})
	}
	data, _ = Encode(&c)
	res := f.ApplyCommand(2, data).(SubmitDriversResult)
	if res.Outcomes[0].Err != nil || res.Outcomes[1].Err != nil || !errors.Is(res.Outcomes[2].Err, model.ErrQueueFull) {
		t.Fatalf("outcomes %+v, want two taken and the third refused at the queue bound", res.Outcomes)
	}
	if u := f.State().NamespaceUse("etl"); u.Queued != 2 {
		t.Fatalf("etl queues %d, want 2", u.Queued)
	}
	if got := slices.Collect(maps.Keys(f.State().NamespaceUses())); !slices.Equal(got, []string{"etl"}) {
		t.Fatalf("namespaces in use %v, want etl alone", got)
	}
}

// A submission or registration token names rows of one namespace: a
// reuse from another namespace is refused and changes nothing, a retry
// from the same one yields the row.
func TestTokensAreTheirNamespaces(t *testing.T) {
	f := New()
	apply := applier(t, f)
	apply(&model.ApplyNamespace{Namespace: model.Namespace{Name: "etl", Weight: 1, DriverShare: 1, PriorityMax: 100}, Time: 1})
	sub := func(id, ns string) any {
		return apply(&model.SubmitDriver{ID: id, Token: "key", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 1, Namespace: ns}, Time: 2})
	}
	if r, ok := sub(driverID(0), "etl").(SubmitResult); !ok || r.Existing {
		t.Fatalf("first submission: %+v", r)
	}
	hash := hashOf(t, f)
	if err, _ := sub(driverID(1), "").(error); !errors.Is(err, model.ErrTokenInUse) || hashOf(t, f) != hash {
		t.Fatalf("default reusing etl's key: %v, want ErrTokenInUse and nothing changed", err)
	}
	if r, ok := sub(driverID(2), "etl").(SubmitResult); !ok || !r.Existing || r.DriverID != driverID(0) {
		t.Fatalf("etl's retry: %+v, want driver 0", r)
	}
	reg := func(id, ns string) any {
		return apply(&model.RegisterApp{ID: id, Token: "akey", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"e"}, Namespace: ns, Time: 3})
	}
	if _, ok := reg("app-20261129120000-0000", "etl").(RegisterAppResult); !ok {
		t.Fatal("first registration refused")
	}
	hash = hashOf(t, f)
	if err, _ := reg("app-20261129120000-0001", "").(error); !errors.Is(err, model.ErrTokenInUse) || hashOf(t, f) != hash {
		t.Fatalf("default reusing etl's app key: %v, want ErrTokenInUse and nothing changed", err)
	}
}

// applier returns a function that encodes a command and applies it to f
// at the next index, returning what Apply returned.
func applier(t tb, f *FSM) func(model.Command) any {
	var index uint64
	return func(c model.Command) any {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		return f.ApplyCommand(index, data)
	}
}
