package fsm

import (
	"bytes"
	"io"
	"testing"
)

// RaiseSequences raises and never lowers, and the state it returns is one
// Restore takes, with the same tables otherwise.
func TestRaiseSequences(t *testing.T) {
	f := New()
	for i, entry := range fuzzLog(t) {
		f.ApplyCommand(uint64(i+1), entry)
	}
	var buf memSink
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	driver, app := f.NextDriverSeq(), f.NextAppSeq()
	for _, tc := range []struct{ d, a, wantD, wantA int }{
		{driver + 50, app + 7, driver + 50, app + 7},
		{0, 0, driver, app},
		{driver + 1, 0, driver + 1, app},
	} {
		state, err := RaiseSequences(buf.Bytes(), tc.d, tc.a)
		if err != nil {
			t.Fatal(err)
		}
		g := New()
		if err := g.Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
			t.Fatalf("restore of the raised state: %v", err)
		}
		if g.NextDriverSeq() != tc.wantD || g.NextAppSeq() != tc.wantA {
			t.Errorf("raised to (%d, %d): next (%d, %d), want (%d, %d)", tc.d, tc.a, g.NextDriverSeq(), g.NextAppSeq(), tc.wantD, tc.wantA)
		}
		if len(g.Drivers()) != len(f.Drivers()) || len(g.Workers()) != len(f.Workers()) {
			t.Errorf("the raised state lost rows")
		}
	}
	if _, err := RaiseSequences([]byte("not a snapshot"), 1, 1); err == nil {
		t.Error("a state that is no snapshot was raised")
	}
}
