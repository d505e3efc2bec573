package webui

import (
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/": "/", "/?refresh=0": "/?refresh=0", "/ui/drivers/driver-20240101000000-1": "/ui/drivers/driver-20240101000000-1",
		"/ui/login": "/", "//evil.example": "/", "/\\evil.example": "/", "http://evil.example/ui/": "/",
		"ui/drivers": "/", "/v1/drivers": "/", "/ui/x\r\nSet-Cookie: a=b": "/", "javascript:alert(1)": "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// Executor IDs are not positions in the app's list: the rows of old
// finished executors are dropped, so the first may be executor 5.
func TestExecutorByID(t *testing.T) {
	s := api.AppStatus{App: &model.App{ID: "app-20240101000000-1"}, Executors: []*model.Executor{{ID: 5, WorkerID: "w1"}, {ID: 7, WorkerID: "w2"}}}
	for eid, want := range map[string]string{"5": "w1", "7": "w2"} {
		if e, ok := executor(s, eid); !ok || e.WorkerID != want {
			t.Fatalf("executor %s: %+v, %v", eid, e, ok)
		}
	}
	for _, eid := range []string{"0", "1", "6", "05", "-1", "x", ""} {
		if e, ok := executor(s, eid); ok {
			t.Fatalf("executor %q found: %+v", eid, e)
		}
	}
}
