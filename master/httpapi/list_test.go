package httpapi

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// A list written a row at a time is the same bytes as the whole list
// encoded at once, HTML escapes, empty and nil lists included.
func TestWriteListIsWriteJSON(t *testing.T) {
	rows := []*model.Driver{
		{ID: "driver-20261129120000-0000", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", "echo '<a&b>'"}, Env: map[string]string{"B": "2", "A": "1"}}},
		{ID: "driver-20261129120000-0001", Message: "waiting: \u2028"},
	}
	checkList(t, rows)
	checkList(t, rows[:1])
	checkList(t, []*model.Driver{})
	checkList(t, []*model.Driver(nil))
	checkList(t, []api.AppStatus{{App: &model.App{ID: "app-20261129120000-0000"}, Executors: []*model.Executor{{ID: 1}}}})
}

func checkList[T any](t *testing.T, rows []T) {
	t.Helper()
	whole, list := httptest.NewRecorder(), httptest.NewRecorder()
	writeJSON(whole, 200, rows)
	writeList(list, slog.New(slog.NewTextHandler(io.Discard, nil)), rows)
	if list.Body.String() != whole.Body.String() || list.Code != whole.Code || list.Header().Get("Content-Type") != whole.Header().Get("Content-Type") {
		t.Fatalf("a list of %d rows:\nrow at a time %d %q\nat once       %d %q", len(rows), list.Code, list.Body, whole.Code, whole.Body)
	}
}
