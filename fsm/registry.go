package fsm

import (
	"fmt"
	"reflect"

	"github.com/drover-project/drover/model"
)

// The registry of command types (Consul's registerCommand): each type is
// registered once, here, with its payload struct, its apply function and
// whether an older master may skip it. Encode, Decode, Apply and the fuzz
// seeds all read it, so a type byte can be written, read and applied only
// with the struct whose CommandType method returns it. A type registered
// twice, a payload whose struct is not named as its type, or a type
// byte at or above IgnoreUnknownTypeFlag panics when the package loads:
// a programming error every test catches (TestEveryCommandTypeRegistered
// checks that none is missing).

// Command types whose apply function gives a result beside a refusal, for
// their writers (Returns.Commit).
var (
	// SubmitDriver gives the driver's ID, and whether its token was known.
	SubmitDriver = returns(func(f *FSM, c *model.SubmitDriver) (SubmitResult, error) { return submission{f}.one(c) })
	// SubmitDrivers gives each submission's SubmitResult or refusal.
	SubmitDrivers = returns(func(f *FSM, c *model.SubmitDrivers) (SubmitDriversResult, error) { return submission{f}.batch(c) })
	// PlaceDrivers gives the placements that applied.
	PlaceDrivers = returns((*FSM).applyPlaceDrivers)
	// RegisterApp gives the app's ID, and whether its token was known.
	RegisterApp = returns((*FSM).applyRegisterApp)
	// PlaceExecutors gives the executor placements that applied.
	PlaceExecutors = returns((*FSM).applyPlaceExecutors)
	// FireSchedule gives what became of the slot (FireResult).
	FireSchedule = returns(func(f *FSM, c *model.FireSchedule) (FireResult, error) { return firing{f}.apply(c) })
)

func init() {
	refuses(mustApply, (*FSM).applyRegisterWorker)
	refuses(mustApply, (*FSM).applyReportAttempts)
	refuses(mustApply, (*FSM).applyKillDriver)
	refuses(mustApply, (*FSM).applyWorkerLost)
	refuses(mustApply, (*FSM).applyDecommissionWorker)
	refuses(mustApply, (*FSM).applyRequestExecutors)
	refuses(mustApply, (*FSM).applyKillExecutors)
	refuses(mustApply, (*FSM).applyEndApp)
	refuses(mustApply, (*FSM).applyPruneCompleted)
	refuses(mustApply, (*FSM).applyReportBatch)
	// The namespaces and ACL tokens are tables of their own, which
	// their apply functions change alone.
	refuses(mustApply, func(f *FSM, c *model.ApplyNamespace) error { return f.t.applyNamespace(c, f.index) })
	refuses(mustApply, func(f *FSM, c *model.DeleteNamespace) error { return f.t.deleteNamespace(c) })
	refuses(mustApply, func(f *FSM, c *model.CreateACLToken) error { return f.t.createACLToken(c, f.index) })
	refuses(mustApply, func(f *FSM, c *model.RevokeACLToken) error { return f.t.revokeACLToken(c) })
	refuses(mustApply, func(f *FSM, c *model.PreemptAttempts) error { return preemption{f}.apply(c) })
	// The schedules are a table of their own too; a fire submits
	// through the drivers' path (FireSchedule above). Each change of a
	// row is an event.
	refuses(mustApply, func(f *FSM, c *model.CreateSchedule) error {
		return scheduleChanged(f, c.Schedule.Name, f.t.createSchedule(c, f.index))
	})
	refuses(mustApply, func(f *FSM, c *model.DeleteSchedule) error { return scheduleChanged(f, c.Name, f.t.deleteSchedule(c)) })
	refuses(mustApply, func(f *FSM, c *model.SuspendSchedule) error {
		return scheduleChanged(f, c.Name, f.t.suspendSchedule(c, f.index))
	})
}

// mustApply is the ignorable flag of a command every master must apply:
// one that does not know its type halts there (DESIGN.md says when a
// type may be registered ignorable instead, with true).
const mustApply = false

// command is what the registry holds of one command type.
type command struct {
	// ignorable says writers set IgnoreUnknownTypeFlag in the type byte.
	ignorable bool
	// payload returns a new payload struct to decode an entry into.
	payload func() model.Command
	// apply applies a payload that payload made and returns Apply's
	// result: nil, a refusal (an error), or the type's result.
	apply func(f *FSM, c model.Command) any
}

// commands is the registry, by type byte.
var commands [IgnoreUnknownTypeFlag]*command

// registered returns the registry's entry of type t, with the flag
// cleared, or nil for a type this version does not know.
func registered(t model.CommandType) *command {
	if t &^= IgnoreUnknownTypeFlag; t == 0 {
		return nil
	}
	return commands[t]
}

// payloadOf is a payload struct type T used by pointer, as Decode makes
// it and model's CommandType methods take it.
type payloadOf[T any] interface {
	*T
	model.Command
}

// register adds the command type of payload *T to the registry.
func register[T any, P payloadOf[T]](ignorable bool, apply func(*FSM, P) any) {
	t := P(new(T)).CommandType()
	switch {
	case t == 0 || t >= IgnoreUnknownTypeFlag:
		panic(fmt.Sprintf("fsm: %T has type byte %d, outside 1 to %d", P(nil), t, IgnoreUnknownTypeFlag-1))
	case commands[t] != nil:
		panic(fmt.Sprintf("fsm: %s is registered twice", t))
	case reflect.TypeFor[T]().Name() != t.String():
		// The struct and the type share their name, so a CommandType
		// method that returns another type's byte is caught here.
		panic(fmt.Sprintf("fsm: %T says it is %s", P(nil), t))
	}
	commands[t] = &command{
		ignorable: ignorable,
		payload:   func() model.Command { return P(new(T)) },
		apply:     func(f *FSM, c model.Command) any { return apply(f, c.(P)) },
	}
}

// refuses registers a command type whose apply function returns only a
// refusal: Apply's result is nil or that error.
func refuses[T any, P payloadOf[T]](ignorable bool, apply func(*FSM, P) error) {
	// A nil error is a nil result.
	register(ignorable, func(f *FSM, c P) any { return apply(f, c) })
}

// returns registers a command type, never ignorable, whose apply
// function returns a result R or a refusal; its writers get R back typed
// through the Returns it returns.
func returns[T any, P payloadOf[T], R any](apply func(*FSM, P) (R, error)) Returns[P, R] {
	register(mustApply, func(f *FSM, c P) any {
		r, err := apply(f, c)
		if err != nil {
			return err
		}
		return r
	})
	return Returns[P, R]{}
}

// Returns is a command type of payload P whose apply function returns R
// (SubmitResult, PlaceResult and the like) when it does not refuse the
// command.
type Returns[P model.Command, R any] struct{}

// Commit commits c with commit, a master's path through Raft
// (service.Core.Apply) that returns what Apply returned, and gives the
// result back as R. A refusal, or commit's own error, comes back as the
// error, with R's zero value.
func (Returns[P, R]) Commit(commit func(model.Command) (any, error), c P) (R, error) {
	res, err := commit(c)
	if err != nil {
		var zero R
		return zero, err
	}
	// The registry pairs P with the apply function that returned res.
	return res.(R), nil
}
