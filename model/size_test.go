package model

import (
	"reflect"
	"testing"
)

// Every field of a submission and of an app registration that a submitter
// can make long counts in ProgramSize, except those named here, which are
// not the program and are bounded apart. A field added to either command
// fails this test until ProgramSize counts it or it is named here.
func TestProgramSizeCountsEveryField(t *testing.T) {
	notProgram := map[string]bool{"ID": true, "Token": true, "Client": true, "DriverID": true}
	for _, cmd := range []interface{ ProgramSize() int }{&SubmitDriver{}, &RegisterApp{}} {
		v := reflect.ValueOf(cmd).Elem()
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			before := cmd.ProgramSize()
			var long reflect.Value
			switch x := f.Interface().(type) {
			case string:
				long = reflect.ValueOf("xxxx")
			case []string:
				long = reflect.ValueOf([]string{"xxxx"})
			case map[string]string:
				long = reflect.ValueOf(map[string]string{"X": "xxxx"})
			case []Artifact:
				long = reflect.ValueOf([]Artifact{{Source: "x", URL: "x", Upload: "x", SHA256: "x", Archive: "x", Name: "x", Dest: "x"}})
			case ResourceAmounts:
				long = reflect.ValueOf(ResourceAmounts{"gpu": 1})
			case int, int64, bool:
				continue
			default:
				t.Errorf("%T.%s is a %T: say in ProgramSize whether and how it counts", cmd, sf.Name, x)
				continue
			}
			f.Set(long.Convert(f.Type()))
			grew := cmd.ProgramSize() > before
			if grew == notProgram[sf.Name] {
				t.Errorf("%T.%s: counted %v, want %v", cmd, sf.Name, grew, !notProgram[sf.Name])
			}
		}
	}
	// Each artifact's every string counts, byte for byte.
	a := SubmitDriver{Artifacts: []Artifact{{Source: "ab", URL: "ab", Upload: "ab", SHA256: "ab", Archive: "ab", Name: "ab", Dest: "ab", Mode: 0o755}}}
	if got := a.ProgramSize(); got != 14 {
		t.Errorf("an artifact of seven 2-byte strings counts %d bytes, want 14", got)
	}
	d := SubmitDriver{Name: "n", Argv: []string{"sleep", "10"}, Env: map[string]string{"A": "bc"}, Resources: ResourceAmounts{"gpu": 2}}
	if got, want := d.ProgramSize(), 1+5+2+1+2+3; got != want {
		t.Errorf("ProgramSize = %d, want %d", got, want)
	}
}
