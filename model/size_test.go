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
		for _, sf := range reflect.VisibleFields(v.Type()) {
			if sf.Anonymous {
				continue // its fields are visited on their own
			}
			f := v.FieldByIndex(sf.Index)
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
			case int, int64, bool, *int:
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
	a := SubmitDriver{DriverSpec: DriverSpec{Artifacts: []Artifact{{Source: "ab", URL: "ab", Upload: "ab", SHA256: "ab", Archive: "ab", Name: "ab", Dest: "ab", Mode: 0o755}}}}
	if got := a.ProgramSize(); got != 14 {
		t.Errorf("an artifact of seven 2-byte strings counts %d bytes, want 14", got)
	}
	d := SubmitDriver{Name: "n", DriverSpec: DriverSpec{Argv: []string{"sleep", "10"}, Env: map[string]string{"A": "bc"}, Resources: ResourceAmounts{"gpu": 2}}}
	if got, want := d.ProgramSize(), 1+5+2+1+2+3; got != want {
		t.Errorf("ProgramSize = %d, want %d", got, want)
	}
}

// A driver's and an app's row count the program of the submission or
// registration that made them, the same strings.
func TestRowsProgramSizeIsTheirCommands(t *testing.T) {
	arts := []Artifact{{URL: "https://example.com/job.jar", SHA256: "ab", Name: "job.jar"}}
	c := SubmitDriver{Name: "n", DriverSpec: DriverSpec{User: "etl", Argv: []string{"sleep", "10"}, Env: map[string]string{"A": "bc"}, Artifacts: arts, Resources: ResourceAmounts{"gpu": 2}}}
	d := Driver{ID: "driver-20261129120000-0000", Token: "t", Name: c.Name, DriverSpec: DriverSpec{User: c.User, Argv: c.Argv, Env: c.Env, Artifacts: c.Artifacts, Resources: c.Resources}, Message: "m"}
	if d.ProgramSize() != c.ProgramSize() {
		t.Errorf("a driver row counts %d bytes, its submission %d", d.ProgramSize(), c.ProgramSize())
	}
	r := RegisterApp{Name: "n", User: "etl", Argv: c.Argv, Env: c.Env, Artifacts: arts, ResourcesPerExecutor: c.Resources}
	a := App{ID: "app-20261129120000-0000", Token: "t", Name: r.Name, ExecutorSpec: ExecutorSpec{User: r.User, Argv: r.Argv, Env: r.Env, Artifacts: r.Artifacts, ResourcesPerExecutor: r.ResourcesPerExecutor}}
	if a.ProgramSize() != r.ProgramSize() {
		t.Errorf("an app row counts %d bytes, its registration %d", a.ProgramSize(), r.ProgramSize())
	}
}
