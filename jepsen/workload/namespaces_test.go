package workload

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/jepsen/history"
)

// fakeMaster answers PUT /v1/namespaces/{name} with the statuses of
// puts in turn (200 once they run out) and refuses everything else.
type fakeMaster struct {
	mu     sync.Mutex
	puts   []int
	bodies map[string]map[string]any
}

func (f *fakeMaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/v1/namespaces/")
	if r.Method != http.MethodPut || !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "refused", Code: api.CodeInvalidRequest})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	status := http.StatusOK
	if len(f.puts) > 0 {
		status, f.puts = f.puts[0], f.puts[1:]
	}
	w.WriteHeader(status)
	if status != http.StatusOK {
		_ = json.NewEncoder(w).Encode(api.Error{Error: "no", Code: api.CodeNotFound})
		return
	}
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	f.bodies[name] = body
	_, _ = w.Write([]byte("{}"))
}

func newFake(t *testing.T, puts ...int) (*fakeMaster, *client.Client) {
	t.Helper()
	f := &fakeMaster{puts: puts, bodies: map[string]map[string]any{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cl, err := client.New([]string{srv.Listener.Addr().String()}, client.Options{RetryInterval: 10 * time.Millisecond, NoBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	return f, cl
}

// TestApplyNamespaces: every namespace is applied with its quota, weight,
// driver share and preemption in the body's fields, through answers
// without authority; a refusal ends the setup naming the namespace.
func TestApplyNamespaces(t *testing.T) {
	f, cl := newFake(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ApplyNamespaces(ctx, cl, Namespaces()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got, _ := json.Marshal(f.bodies)
	f.mu.Unlock()
	want := `{"adhoc":{"driver_share":1,"max_running_drivers":2,"priority_max":100,"weight":1},` +
		`"etl":{"cores":3,"driver_share":1,"priority_max":100,"weight":1},` +
		`"ml":{"cores":3,"driver_share":1,"memory_mb":160,"priority_max":100,"weight":1},` +
		`"urgent":{"driver_share":1,"preempt":true,"priority_max":100,"weight":2}}`
	if string(got) != want {
		t.Fatalf("bodies\n%s\nwant\n%s", got, want)
	}

	_, cl = newFake(t, http.StatusNotFound)
	err := ApplyNamespaces(ctx, cl, Namespaces())
	if err == nil || !strings.HasPrefix(err.Error(), "namespace etl not applied: ") {
		t.Fatalf("want etl not applied, got %v", err)
	}
}

// TestSubmissionsSpreadOverNamespaces: with namespaces, submissions name
// each of them and default; without, none names one.
func TestSubmissionsSpreadOverNamespaces(t *testing.T) {
	for _, nss := range [][]string{nil, {"etl", "ml"}} {
		_, cl := newFake(t)
		rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		w := &Workload{cfg: Config{Namespaces: nss, OpTimeout: 5 * time.Second}, rec: rec, cl: cl}
		rng := rand.New(rand.NewPCG(1, 2))
		seen := map[string]int{}
		for range 60 {
			seen[w.Submit(context.Background(), 0, rng).Namespace]++
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if len(seen) != len(nss)+1 {
			t.Errorf("namespaces %v: submissions named %v", nss, seen)
		}
	}
}
