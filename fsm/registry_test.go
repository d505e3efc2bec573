package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

// Every command type model names is registered, under its own name, and
// nothing else is: the registry is the only list of command types, so a
// type without an entry would halt every master at its first entry.
func TestEveryCommandTypeRegistered(t *testing.T) {
	last := model.CmdFireSchedule
	if s := (last + 1).String(); s != fmt.Sprintf("CommandType(%d)", last+1) {
		t.Fatalf("model names %s past %s: register it and raise last here", s, last)
	}
	for ct := model.CommandType(1); ct < IgnoreUnknownTypeFlag; ct++ {
		c := registered(ct)
		switch {
		case ct <= last && c == nil:
			t.Errorf("%s is not registered", ct)
		case ct > last && c != nil:
			t.Errorf("type byte %d is registered but model names no such type", ct)
		case c != nil && c.payload().CommandType() != ct:
			t.Errorf("%s is registered with the payload of %s", ct, c.payload().CommandType())
		}
	}
	if registered(0) != nil || registered(IgnoreUnknownTypeFlag|model.CmdKillDriver) != registered(model.CmdKillDriver) {
		t.Error("registered does not clear the flag, or knows type 0")
	}
}

// notACommand is a payload whose struct is named unlike the type it
// claims, a type no one registered.
type notACommand struct{}

func (*notACommand) CommandType() model.CommandType { return 0x7f }

// A second registration of a type, or a payload that claims a type it is
// not named as, panics when the package loads, and leaves the registry
// as it was.
func TestRegisterRefusesMistakes(t *testing.T) {
	panics := func(name string, register func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil {
				t.Fatalf("%s did not panic", name)
			}
			if msg := fmt.Sprint(r); !strings.HasPrefix(msg, "fsm: ") {
				t.Fatalf("%s panicked with %q", name, msg)
			}
		}()
		register()
	}
	before := commands
	panics("a second KillDriver", func() { refuses(mustApply, (*FSM).applyKillDriver) })
	panics("a second SubmitDriver", func() {
		returns(func(f *FSM, c *model.SubmitDriver) (SubmitResult, error) { return submission{f}.one(c) })
	})
	panics("a misnamed payload", func() {
		refuses(mustApply, func(*FSM, *notACommand) error { return nil })
	})
	if commands != before {
		t.Fatal("a refused registration changed the registry")
	}
	if _, err := Encode(&notACommand{}); err == nil {
		t.Fatal("Encode wrote an entry of a type not registered")
	}
}

// Returns.Commit hands back the apply function's result typed, and a
// refusal or a failed commit as the error.
func TestReturnsCommit(t *testing.T) {
	f := New()
	var index uint64
	apply := func(c model.Command) (any, error) {
		data, err := Encode(c)
		if err != nil {
			return nil, err
		}
		index++
		res := f.ApplyCommand(index, data)
		if err, ok := res.(error); ok {
			return nil, err
		}
		return res, nil
	}
	sub := &model.SubmitDriver{ID: driverID(0), Token: "t0", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, Time: 1}
	res, err := SubmitDriver.Commit(apply, sub)
	if err != nil || res != (SubmitResult{DriverID: driverID(0)}) {
		t.Fatalf("first submission: %+v, %v", res, err)
	}
	if res, err = SubmitDriver.Commit(apply, sub); err != nil || res != (SubmitResult{DriverID: driverID(0), Existing: true}) {
		t.Fatalf("its retry: %+v, %v", res, err)
	}
	bad := &model.SubmitDriver{ID: "driver-x", Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}}
	if res, err = SubmitDriver.Commit(apply, bad); err == nil || res != (SubmitResult{}) {
		t.Fatalf("a refused submission: %+v, %v", res, err)
	}
}
