package fsm

import (
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

// An upload is live while a driver or app that is not in a final state
// names it; ending the last one that does lets it go, though the row stays.
func TestLiveUploads(t *testing.T) {
	sum := func(c string) string { return strings.Repeat(c, 64) }
	up := func(c, name string) model.Artifact {
		a, err := model.NormalizeArtifact(model.Artifact{Upload: sum(c), Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	b := &logBuilder{t: t}
	b.add(&model.SubmitDriver{ID: driverID(1), DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{up("a", "a.sh"), up("b", "b.sh"), {Source: "https://h/c.sh", URL: "https://h/c.sh", Name: "c.sh"}}}, Time: 1000})
	b.add(&model.SubmitDriver{ID: driverID(2), DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{up("b", "b.sh")}}, Time: 1001})
	app := appSpec(1)
	app.Artifacts = []model.Artifact{up("c", "c.jar")}
	app.Time = 1002
	b.add(app)
	b.add(&model.KillDriver{DriverID: driverID(1), Time: 2000})
	f := replay(t, b.entries[:3])
	if got, want := f.State().LiveUploads(), []string{sum("a"), sum("b"), sum("c")}; !slices.Equal(got, want) {
		t.Fatalf("LiveUploads = %v, want %v", got, want)
	}

	b.add(&model.EndApp{AppID: appID(1), State: model.AppFinished, Time: 2001})
	f = replay(t, b.entries)
	if _, ok := f.State().Driver(driverID(1)); !ok {
		t.Fatal("the killed driver left the table")
	}
	if got, want := f.State().LiveUploads(), []string{sum("b")}; !slices.Equal(got, want) {
		t.Fatalf("after the kill and the app's end: LiveUploads = %v, want %v", got, want)
	}
}

// A schedule's template pins its uploads while the schedule exists, with
// no run live (each run is staged from them, a day or more after the
// upload); deleting the schedule lets them go.
func TestLiveUploadsOfSchedules(t *testing.T) {
	sum := strings.Repeat("d", 64)
	a, err := model.NormalizeArtifact(model.Artifact{Upload: sum, Name: "etl.sh"})
	if err != nil {
		t.Fatal(err)
	}
	b := &logBuilder{t: t}
	b.add(&model.CreateSchedule{Schedule: model.Schedule{Name: "nightly", Cron: "0 2 * * *", TimeZone: "UTC", Concurrency: model.ConcurrencyAllow, History: 10,
		Template: model.SubmitDriver{DriverSpec: model.DriverSpec{Argv: []string{"./etl.sh"}, Cores: 1, MemoryMB: 256, Artifacts: []model.Artifact{a}}}}, Time: 1000})
	b.add(&model.DeleteSchedule{Name: "nightly", Time: 2000})
	if got := replay(t, b.entries[:1]).State().LiveUploads(); !slices.Equal(got, []string{sum}) {
		t.Fatalf("with the schedule: LiveUploads = %v, want its template's upload", got)
	}
	if got := replay(t, b.entries).State().LiveUploads(); len(got) != 0 {
		t.Fatalf("after the schedule's deletion: LiveUploads = %v, want none", got)
	}
}
