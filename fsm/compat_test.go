package fsm

// Tests of the log compatibility rules in DESIGN.md: unknown fields are
// ignored, unknown types flagged ignorable are skipped, and every other
// entry a master cannot decode halts it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-project/drover/model"
)

// withUnknownFields returns entry, a FormatJSON entry, with a field no
// version knows added to every JSON object of its payload that is a
// struct, at every depth, as a newer master's entry would carry a field
// added after this version; in FormatPack when pack.
func withUnknownFields(t *testing.T, entry []byte, pack bool) []byte {
	dec := json.NewDecoder(bytes.NewReader(entry[2:]))
	dec.UseNumber() // keeps int64 times exact
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var add func(v any)
	add = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				// Maps whose keys are data, not fields.
				if !slices.Contains([]string{"env", "resources", "resources_per_executor"}, k) {
					add(c)
				}
			}
			v["added_later"] = map[string]any{"nested": []any{1, "two"}, "flag": true}
		case []any:
			for _, c := range v {
				add(c)
			}
		}
	}
	add(v)
	if pack {
		var body []byte
		if err := codec.NewEncoderBytes(&body, packHandle).Encode(numbers(v)); err != nil {
			t.Fatal(err)
		}
		return append([]byte{FormatPack, entry[1]}, body...)
	}
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(entry[:2:2], body...)
}

// numbers replaces the json.Numbers in v, a decoded JSON value, by the
// int64 or float64 they hold, as MessagePack writes numbers.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = numbers(c)
		}
	case []any:
		for i, c := range v {
			v[i] = numbers(c)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// inPack returns the FormatJSON entries in FormatPack: the same type byte
// and payload.
func inPack(t *testing.T, entries [][]byte) [][]byte {
	out := make([][]byte, len(entries))
	for i, e := range entries {
		_, payload, err := Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = EncodeAs(FormatPack, payload); err != nil {
			t.Fatal(err)
		}
		out[i][1] = e[1] // with the flag, if e has it
	}
	return out
}

// A log in FormatPack applies exactly as the same log in FormatJSON: the
// same result for every entry and the same tables, so masters may switch
// formats anywhere in the log. The MessagePack entries are smaller.
func TestPackEntriesApplyAsJSON(t *testing.T) {
	entries := scenario(t)
	packed := inPack(t, entries)
	plain, other := New(), New()
	var jsonBytes, packBytes int
	for i := range entries {
		want, got := plain.ApplyCommand(uint64(i+1), entries[i]), other.ApplyCommand(uint64(i+1), packed[i])
		if resultText(got) != resultText(want) {
			t.Fatalf("entry %d in MessagePack: %s, in JSON: %s", i+1, resultText(got), resultText(want))
		}
		jsonBytes, packBytes = jsonBytes+len(entries[i]), packBytes+len(packed[i])
	}
	if other.Err() != nil || hashOf(t, other) != hashOf(t, plain) {
		t.Fatalf("the log in MessagePack left other tables (Err %v)", other.Err())
	}
	// The formats may alternate entry by entry.
	mixed := New()
	for i := range entries {
		e := entries[i]
		if i%2 == 1 {
			e = packed[i]
		}
		mixed.ApplyCommand(uint64(i+1), e)
	}
	if mixed.Err() != nil || hashOf(t, mixed) != hashOf(t, plain) {
		t.Fatalf("a log of both formats left other tables (Err %v)", mixed.Err())
	}
	if packBytes >= jsonBytes {
		t.Errorf("%d bytes in MessagePack, %d in JSON", packBytes, jsonBytes)
	}
	t.Logf("%d entries: %d bytes in JSON, %d in MessagePack", len(entries), jsonBytes, packBytes)
}

// A log whose entries carry fields this version does not know applies
// exactly as the same log without them: same results, same tables.
func TestUnknownFieldsAreIgnored(t *testing.T) {
	for _, pack := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "MessagePack"}[pack], func(t *testing.T) { unknownFieldsAreIgnored(t, pack) })
	}
}

func unknownFieldsAreIgnored(t *testing.T, pack bool) {
	entries := scenario(t)
	plain, extended := New(), New()
	for i, e := range entries {
		x := withUnknownFields(t, e, pack)
		if bytes.Equal(x, e) {
			t.Fatalf("entry %d gained no field", i+1)
		}
		want, got := plain.ApplyCommand(uint64(i+1), e), extended.ApplyCommand(uint64(i+1), x)
		if resultText(got) != resultText(want) {
			t.Fatalf("entry %d with unknown fields: %s, without: %s", i+1, resultText(got), resultText(want))
		}
	}
	if extended.Err() != nil {
		t.Fatalf("halted: %v", extended.Err())
	}
	if hashOf(t, extended) != hashOf(t, plain) {
		t.Fatal("unknown fields changed the tables")
	}
	if extended.Index() != uint64(len(entries)) {
		t.Fatalf("Index %d, want %d", extended.Index(), len(entries))
	}
}

// An entry of an unknown type flagged ignorable is skipped: it changes no
// table, the applied index moves past it, and the entries after it apply.
// A known type with the flag applies as without it.
func TestIgnorableEntries(t *testing.T) {
	entries := scenario(t)
	mid := len(entries) / 2
	// The log without the skipped entry, each entry at the index it has
	// with it: rows carry the index that changed them.
	plain := New()
	for i, e := range entries {
		index := uint64(i + 1)
		if i >= mid {
			index++
		}
		plain.ApplyCommand(index, e)
	}
	want := hashOf(t, plain)
	unknown := append([]byte{FormatJSON, byte(IgnoreUnknownTypeFlag | 99)}, `{"a field":"of a type from a later version"}`...)

	f := New()
	for i, e := range entries[:mid] {
		f.ApplyCommand(uint64(i+1), e)
	}
	before := hashOf(t, f)
	if res := f.ApplyCommand(uint64(mid+1), unknown); res != nil {
		t.Fatalf("unknown ignorable entry: Apply returned %v, want nil", res)
	}
	if hashOf(t, f) != before || f.Index() != uint64(mid+1) || f.Err() != nil {
		t.Fatalf("unknown ignorable entry: tables changed %v, Index %d (want %d), Err %v",
			hashOf(t, f) != before, f.Index(), mid+1, f.Err())
	}
	for i, e := range entries[mid:] {
		f.ApplyCommand(uint64(mid+2+i), e)
	}
	if hashOf(t, f) != want || f.Index() != uint64(len(entries)+1) {
		t.Fatalf("after the skipped entry: tables differ from the log without it %v, Index %d", hashOf(t, f) != want, f.Index())
	}

	flagged := New()
	for i, e := range entries {
		e = bytes.Clone(e)
		e[1] |= byte(IgnoreUnknownTypeFlag)
		flagged.ApplyCommand(uint64(i+1), e)
	}
	if flagged.Err() != nil || hashOf(t, flagged) != hashOf(t, replay(t, entries)) {
		t.Fatalf("known types flagged ignorable applied differently (Err %v)", flagged.Err())
	}
	// Encode sets the flag on the types registered ignorable only, and
	// every master must apply a KillDriver.
	if data, err := Encode(&model.KillDriver{DriverID: "d"}); err != nil || data[1] != 0x05 {
		t.Fatalf("Encode of a KillDriver: % x, %v; want type byte 0x05", data, err)
	}
}

// haltCases are entries a master cannot decode, each with what Err must
// name besides the index.
var haltCases = []struct {
	name  string
	entry []byte
	want  []string
}{
	{"unknown type", []byte("\x01\x63{}"), []string{"type byte 0x63 (unknown type)"}},
	{"unknown type 0x7f", []byte("\x01\x7f{}"), []string{"type byte 0x7f (unknown type)"}},
	{"unknown format version", []byte("\x03\x02{}"), []string{"type byte 0x02 (unknown format version)", "format version 3"}},
	{"MessagePack of the wrong shape", []byte("\x02\x05\x81\xa9driver_id\x01"), []string{"type byte 0x05 (KillDriver)"}},
	{"MessagePack, trailing data", []byte("\x02\x05\x80\x80"), []string{"type byte 0x05 (KillDriver)", "1 bytes after the payload"}},
	{"MessagePack, cut short", []byte("\x02\x05\x81\xa9driver_id"), []string{"type byte 0x05 (KillDriver)"}},
	{"MessagePack, no payload", []byte{FormatPack, byte(model.CmdKillDriver)}, []string{"type byte 0x05 (KillDriver)"}},
	{"payload of the wrong shape", []byte("\x01\x02{\"id\":1}"), []string{"type byte 0x02 (SubmitDriver)", "cannot unmarshal"}},
	{"flagged, payload of the wrong shape", []byte("\x01\x82{\"id\":1}"), []string{"type byte 0x82 (SubmitDriver, flagged ignorable)"}},
	{"trailing data", []byte("\x01\x0d{} {}"), []string{"type byte 0x0d (PruneCompleted)", "after top-level value"}},
	{"no payload", []byte{FormatJSON, byte(model.CmdKillDriver)}, []string{"type byte 0x05 (KillDriver)"}},
	{"no type byte", []byte{FormatJSON}, []string{"no type byte"}},
	{"empty", nil, []string{"no type byte"}},
}

// An entry that cannot be decoded halts the FSM: Halted is closed, Err
// names the entry, the tables stay those of the entries before it whatever
// is applied after, Snapshot and Restore refuse, and readers keep working.
func TestUndecodableEntryHalts(t *testing.T) {
	entries := scenario(t)
	cut := 10
	for _, c := range haltCases {
		t.Run(c.name, func(t *testing.T) {
			f := replay(t, entries[:cut])
			select {
			case <-f.Halted():
				t.Fatal("halted before the entry")
			default:
			}
			if f.Err() != nil {
				t.Fatalf("Err before the entry: %v", f.Err())
			}
			prefix, drivers := hashOf(t, f), len(f.State().Drivers())
			res := f.ApplyCommand(uint64(cut+1), c.entry)
			checkHalt(t, f, uint64(cut), prefix, res)
			for _, w := range append([]string{fmt.Sprintf("Raft index %d", cut+1)}, c.want...) {
				if !strings.Contains(f.Err().Error(), w) {
					t.Errorf("Err %q does not say %q", f.Err(), w)
				}
			}
			for i, e := range entries[cut:] {
				if res := f.ApplyCommand(uint64(cut+2+i), e); res != f.Err() {
					t.Fatalf("entry after the halt: Apply returned %v, want the halt's error", res)
				}
			}
			checkHalt(t, f, uint64(cut), prefix, f.Err())
			if d, ok := f.State().Driver(driverID(0)); !ok || d.ID != driverID(0) || len(f.State().Drivers()) != drivers {
				t.Fatalf("readers after the halt: %v %v, %d drivers, want %d", d, ok, len(f.State().Drivers()), drivers)
			}
			checkInvariants(t, f)
		})
	}
}

// checkHalt checks a halted FSM: res, what Apply returned for the entry
// that halted it, is Err and wraps ErrMalformed; Halted is closed; the
// tables hash to prefix and Index is index, the entry before; no snapshot
// is taken; a restore and a well-formed entry change nothing.
func checkHalt(t tb, f *FSM, index uint64, prefix string, res any) {
	err, _ := res.(error)
	if err == nil || err != f.Err() || !errors.Is(err, ErrMalformed) {
		t.Fatalf("Apply returned %v, Err %v; want the same error, wrapping ErrMalformed", res, f.Err())
	}
	select {
	case <-f.Halted():
	default:
		t.Fatal("Halted is not closed")
	}
	if hashOf(t, f) != prefix || f.Index() != index {
		t.Fatalf("halted FSM: tables changed %v, Index %d, want %d", hashOf(t, f) != prefix, f.Index(), index)
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("a halted FSM gave a snapshot")
	}
	if err := f.Restore(io.NopCloser(strings.NewReader(`{"version":1,"tables":{}}`))); err == nil {
		t.Fatal("a halted FSM restored a snapshot")
	}
	worker, err := Encode(&model.RegisterWorker{ID: "w-after-halt", HTTPAddr: "h:1", Cores: 1, MemoryMB: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.ApplyCommand(index+2, worker); res != f.Err() || hashOf(t, f) != prefix || f.Index() != index {
		t.Fatalf("a well-formed entry after the halt returned %v and changed the tables %v, Index %d", res, hashOf(t, f) != prefix, f.Index())
	}
}
