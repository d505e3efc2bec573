// Package nemesis injects the suite's faults into a running cluster, the
// way Jepsen's nemeses do: process kills and pauses, network partitions
// and flaky links (iptables rules in the suite's own chain), on masters and
// workers. A schedule is drawn from a seed, so the same seed replays the
// same sequence of faults, holds and quiet periods.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-project/drover/internal/wait"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/tests/testcluster"
)

// Env is what faults act on.
type Env struct {
	Cluster *testcluster.Cluster
	Net     *Net
	// Election is the masters' Raft election timeout: short pauses stay
	// under it, long ones exceed it.
	Election time.Duration
	Logf     func(format string, args ...any)

	mu       sync.Mutex
	problems []string
}

// Problems lists what made a fault not do what it claims (an isolated
// leader that did not step down): the run's results cannot be trusted then.
func (env *Env) Problems() []string {
	env.mu.Lock()
	defer env.mu.Unlock()
	return append([]string(nil), env.problems...)
}

func (env *Env) problem(format string, args ...any) {
	env.mu.Lock()
	defer env.mu.Unlock()
	env.problems = append(env.problems, fmt.Sprintf(format, args...))
}

// stepDownWithin is how long an isolated leader may go on calling itself
// leader: it must notice, within its leader lease, that no quorum answers.
const stepDownWithin = 5 * time.Second

// awaitStepDown checks that the partition really cut the leader off: the
// suite, which is on no side of the cut (its address is none of the
// nodes'), asks it until it no longer says it leads.
func (env *Env) awaitStepDown(l *testcluster.Node) {
	deadline := time.Now().Add(stepDownWithin)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := testcluster.State(ctx, l)
		cancel()
		if err == nil && st.Role != "Leader" {
			env.Logf("nemesis: isolated leader %s stepped down (now %s)", l.ID, st.Role)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	env.problem("isolated leader %s still led %s after the partition", l.ID, stepDownWithin)
}

// fault is one kind of fault. start applies it and returns the nodes it
// hits and how to undo it.
type fault struct {
	name   string
	family string
	// hold, when set, overrides the schedule's hold (a short pause must
	// stay under the election timeout whatever the schedule says).
	hold  func(env *Env) time.Duration
	start func(env *Env, rng *rand.Rand) (targets []string, stop func() error, err error)
}

// Families lists the fault families --nemesis accepts.
var Families = []string{"kill", "pause", "partition", "flaky", "worker"}

var faults = []fault{
	{name: "kill-leader", family: "kill", start: func(env *Env, _ *rand.Rand) ([]string, func() error, error) {
		l, err := env.Cluster.Leader(5 * time.Second)
		if err != nil {
			return nil, nil, err
		}
		return killNodes(l)
	}},
	{name: "kill-master", family: "kill", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		return killNodes(pick(rng, env.Cluster.Masters))
	}},
	{name: "kill-all-masters", family: "kill", start: func(env *Env, _ *rand.Rand) ([]string, func() error, error) {
		return killNodes(env.Cluster.Masters...)
	}},
	{name: "kill-leader-and-worker", family: "kill", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		l, err := env.Cluster.Leader(5 * time.Second)
		if err != nil {
			return nil, nil, err
		}
		return killNodes(l, pick(rng, env.Cluster.Workers))
	}},
	{name: "pause-master-short", family: "pause",
		hold: func(env *Env) time.Duration { return env.Election / 2 },
		start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
			return pause(pick(rng, env.Cluster.Masters))
		}},
	{name: "pause-leader-long", family: "pause", start: func(env *Env, _ *rand.Rand) ([]string, func() error, error) {
		l, err := env.Cluster.Leader(5 * time.Second)
		if err != nil {
			return nil, nil, err
		}
		return pause(l)
	}},
	{name: "isolate-leader", family: "partition", start: func(env *Env, _ *rand.Rand) ([]string, func() error, error) {
		l, err := env.Cluster.Leader(5 * time.Second)
		if err != nil {
			return nil, nil, err
		}
		targets, stop, err := cut(env, [][]*testcluster.Node{{l}, without(nodes(env), l)})
		if err == nil {
			env.awaitStepDown(l)
		}
		return targets, stop, err
	}},
	{name: "partition-halves", family: "partition", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		all := shuffled(rng, nodes(env))
		return cut(env, [][]*testcluster.Node{all[:len(all)/2], all[len(all)/2:]})
	}},
	{name: "partition-majorities-ring", family: "partition", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		// Each master hears only from the next ⌊n/2⌋ masters around a
		// ring: every one sees a majority, none the same (Jepsen's
		// majorities-ring); the drops are one-way.
		ms := shuffled(rng, env.Cluster.Masters)
		var targets []string
		for i, dst := range ms {
			for k := len(ms)/2 + 1; k < len(ms); k++ {
				src := ms[(i+k)%len(ms)]
				if err := env.Net.Drop(src.IP, dst.IP, 1); err != nil {
					return nil, nil, err
				}
			}
			targets = append(targets, dst.ID)
		}
		return targets, env.Net.Heal, nil
	}},
	{name: "partition-bridge", family: "partition", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		// Two halves of the masters that only a bridge master joins.
		ms := shuffled(rng, env.Cluster.Masters)
		half := len(ms) / 2
		return cut(env, [][]*testcluster.Node{ms[:half], ms[half+1:]})
	}},
	{name: "flaky-links", family: "flaky", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		all := nodes(env)
		hit := map[string]bool{}
		for i, a := range all {
			for _, b := range all[i+1:] {
				if rng.Float64() >= 0.4 {
					continue
				}
				if err := errors.Join(env.Net.Drop(a.IP, b.IP, 0.3), env.Net.Drop(b.IP, a.IP, 0.3)); err != nil {
					return nil, nil, err
				}
				hit[a.ID], hit[b.ID] = true, true
			}
		}
		return keys(hit), env.Net.Heal, nil
	}},
	{name: "kill-worker", family: "worker", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		return killNodes(pick(rng, env.Cluster.Workers))
	}},
	{name: "kill-worker-group", family: "worker", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		w := pick(rng, env.Cluster.Workers)
		w.KillGroup()
		return []string{w.ID}, w.Start, nil
	}},
	{name: "pause-worker", family: "worker", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		return pause(pick(rng, env.Cluster.Workers))
	}},
	{name: "partition-worker", family: "worker", start: func(env *Env, rng *rand.Rand) ([]string, func() error, error) {
		w := pick(rng, env.Cluster.Workers)
		return cut(env, [][]*testcluster.Node{{w}, env.Cluster.Masters})
	}},
}

// Names returns the faults of the given families, in a fixed order.
func Names(families []string) ([]string, error) {
	var out []string
	for _, f := range families {
		if !slices.Contains(Families, f) {
			return nil, fmt.Errorf("unknown nemesis %q (known: %s)", f, strings.Join(Families, ", "))
		}
	}
	for _, f := range faults {
		if slices.Contains(families, f.family) {
			out = append(out, f.name)
		}
	}
	return out, nil
}

// Step is one fault of a schedule: after Quiet with no fault, Fault starts
// and is healed after Hold. Seed draws its targets.
type Step struct {
	Fault string        `json:"fault"`
	Quiet time.Duration `json:"quiet"`
	Hold  time.Duration `json:"hold"`
	Seed  uint64        `json:"seed"`
}

// Plan draws a schedule of faults from the given families that fills
// total, from seed alone.
func Plan(seed uint64, families []string, total time.Duration) ([]Step, error) {
	names, err := Names(families)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65))
	var out []Step
	for t := time.Duration(0); ; {
		s := Step{
			Fault: names[rng.IntN(len(names))],
			Quiet: time.Duration(1000+rng.IntN(3000)) * time.Millisecond,
			Hold:  time.Duration(2000+rng.IntN(8000)) * time.Millisecond,
			Seed:  rng.Uint64(),
		}
		if t+s.Quiet+s.Hold > total {
			return out, nil
		}
		t += s.Quiet + s.Hold
		out = append(out, s)
	}
}

// Run applies the schedule, recording each fault as a start and a stop
// event, until it ends or ctx is done; every fault it started is healed
// before it returns. A fault that cannot start is logged and skipped.
func Run(ctx context.Context, env *Env, steps []Step, rec *history.Recorder) {
	for i, s := range steps {
		if !wait.Sleep(ctx, s.Quiet) {
			return
		}
		f := lookup(s.Fault)
		hold := s.Hold
		if f.hold != nil {
			hold = f.hold(env)
		}
		targets, stop, err := f.start(env, rand.New(rand.NewPCG(s.Seed, uint64(i))))
		if err != nil {
			env.Logf("nemesis: %s did not start: %v", f.name, err)
			continue
		}
		sort.Strings(targets)
		rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Fault: f.name, Targets: targets, Window: i + 1})
		env.Logf("nemesis: %s on %s for %s", f.name, strings.Join(targets, ","), hold)
		wait.Sleep(ctx, hold)
		if err := stop(); err != nil {
			env.Logf("nemesis: healing %s: %v", f.name, err)
		}
		rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Fault: f.name, Targets: targets, Window: i + 1})
	}
}

// HealAll undoes whatever a fault may have left behind: rules, paused and
// dead nodes.
func HealAll(env *Env) error {
	err := env.Net.Heal()
	for _, n := range nodes(env) {
		if n.Running() {
			_ = n.Signal(syscall.SIGCONT)
		} else if e := n.Start(); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

func lookup(name string) fault {
	for _, f := range faults {
		if f.name == name {
			return f
		}
	}
	panic("nemesis: unknown fault " + name) // Plan only draws known names
}

func killNodes(ns ...*testcluster.Node) ([]string, func() error, error) {
	var ids []string
	for _, n := range ns {
		n.Kill()
		ids = append(ids, n.ID)
	}
	return ids, func() error {
		var err error
		for _, n := range ns {
			err = errors.Join(err, n.Start())
		}
		return err
	}, nil
}

func pause(n *testcluster.Node) ([]string, func() error, error) {
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		return nil, nil, err
	}
	return []string{n.ID}, func() error { return n.Signal(syscall.SIGCONT) }, nil
}

// cut drops every packet between nodes of different groups, both ways.
// Every node in a group is a target: each is cut off from some others.
func cut(env *Env, groups [][]*testcluster.Node) ([]string, func() error, error) {
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					if err := errors.Join(env.Net.Drop(a.IP, b.IP, 1), env.Net.Drop(b.IP, a.IP, 1)); err != nil {
						_ = env.Net.Heal()
						return nil, nil, err
					}
				}
			}
		}
	}
	var targets []string
	for _, g := range groups {
		for _, n := range g {
			targets = append(targets, n.ID)
		}
	}
	return targets, env.Net.Heal, nil
}

func nodes(env *Env) []*testcluster.Node {
	return append(append([]*testcluster.Node{}, env.Cluster.Masters...), env.Cluster.Workers...)
}

func without(ns []*testcluster.Node, x *testcluster.Node) []*testcluster.Node {
	var out []*testcluster.Node
	for _, n := range ns {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

func pick(rng *rand.Rand, ns []*testcluster.Node) *testcluster.Node { return ns[rng.IntN(len(ns))] }

func shuffled(rng *rand.Rand, ns []*testcluster.Node) []*testcluster.Node {
	out := append([]*testcluster.Node{}, ns...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
