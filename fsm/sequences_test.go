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
	driver, app := f.State().NextDriverSeq(), f.State().NextAppSeq()
	for version, state := range map[string][]byte{"packed": snapshotBytes(t, f), "JSON": marshalled(t, f)} {
		for _, tc := range []struct{ d, a, wantD, wantA int }{
			{driver + 50, app + 7, driver + 50, app + 7},
			{0, 0, driver, app},
			{driver + 1, 0, driver + 1, app},
		} {
			raised, err := RaiseSequences(state, tc.d, tc.a)
			if err != nil {
				t.Fatalf("%s: %v", version, err)
			}
			if packed := bytes.HasPrefix(raised, []byte(`{"version":2`)); packed != (version == "packed") {
				t.Errorf("%s: the raised state changed version", version)
			}
			g := New()
			if err := g.Restore(io.NopCloser(bytes.NewReader(raised))); err != nil {
				t.Fatalf("%s: restore of the raised state: %v", version, err)
			}
			if g.State().NextDriverSeq() != tc.wantD || g.State().NextAppSeq() != tc.wantA {
				t.Errorf("%s: raised to (%d, %d): next (%d, %d), want (%d, %d)", version, tc.d, tc.a, g.State().NextDriverSeq(), g.State().NextAppSeq(), tc.wantD, tc.wantA)
			}
			if tc.wantD == driver && tc.wantA == app && hashOf(t, g) != hashOf(t, f) {
				t.Errorf("%s: a raise to lower numbers changed the tables", version)
			}
			if len(g.State().Drivers()) != len(f.State().Drivers()) || len(g.State().Workers()) != len(f.State().Workers()) {
				t.Errorf("%s: the raised state lost rows", version)
			}
		}
	}
	for _, bad := range []string{"not a snapshot", `{"version":2}`, "{\"version\":2}\n\x05ab"} {
		if _, err := RaiseSequences([]byte(bad), 1, 1); err == nil {
			t.Errorf("%q, no snapshot, was raised", bad)
		}
	}
}
