package changes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// fakeMaster serves GET /v1/events from a script: the n-th request gets
// the n-th answer; it records the index each request resumed from.
type fakeMaster struct {
	mu      sync.Mutex
	asked   []string
	answers []func(w http.ResponseWriter, r *http.Request)
}

func (f *fakeMaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.asked)
	f.asked = append(f.asked, r.URL.Query().Get("index"))
	f.mu.Unlock()
	if n >= len(f.answers) {
		<-r.Context().Done() // an idle stream, until the reader goes
		return
	}
	f.answers[n](w, r)
}

// stream writes entries as server-sent events, the last event of each
// with the entry's index as its id, as a master does, then ends the
// stream, or with hold keeps it open until the reader goes.
func stream(hold bool, entries ...[]api.Event) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, evs := range entries {
			for i, e := range evs {
				b, _ := json.Marshal(e)
				fmt.Fprintf(w, "event: %s\n", e.Kind)
				if i == len(evs)-1 {
					fmt.Fprintf(w, "id: %d\n", e.Index)
				}
				fmt.Fprintf(w, "data: %s\n\n", b)
			}
		}
		if hold {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}
}

func upsert(index uint64, id string, state model.DriverState) api.Event {
	return api.Event{Index: index, Kind: api.EventDriver, ID: id, Op: api.OpUpsert, Driver: &model.Driver{ID: id, State: state}}
}

// TestRecorderResumesAndCountsGaps: the recorder goes on from the last
// entry it had after a stream ends, on another master, and after a
// refusal starts its next stream at the next master (the first one
// here, once it has given its entries, keeps an idle stream open); a
// reset opens a gap from that entry to the reset's index, and a stream
// that never reached the run's last index leaves a gap up to it.
func TestRecorderResumesAndCountsGaps(t *testing.T) {
	first := &fakeMaster{answers: []func(http.ResponseWriter, *http.Request){
		stream(false, []api.Event{upsert(1, "d1", model.DriverSubmitted)}, []api.Event{upsert(2, "d1", model.DriverRunning), upsert(2, "d2", model.DriverSubmitted)}),
	}}
	second := &fakeMaster{answers: []func(http.ResponseWriter, *http.Request){
		func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "index 2 is past the last entry of master m2's log (1)", Code: api.CodeInvalidRequest})
		},
		stream(true, []api.Event{{Index: 9, Op: api.OpReset}, upsert(9, "d1", model.DriverFinished), upsert(9, "d2", model.DriverRunning)}),
	}}
	var addrs []string
	for _, f := range []*fakeMaster{first, second} {
		srv := httptest.NewServer(f)
		defer srv.Close()
		addrs = append(addrs, srv.Listener.Addr().String())
	}
	var refusals []error
	var mu sync.Mutex
	r, err := Start(addrs, func(err error) { mu.Lock(); refusals = append(refusals, err); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(0) // before the servers close, which wait for its streams
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !r.Await(ctx, 9) {
		t.Fatal("the recorder never reached index 9")
	}
	log := r.Stop(12)
	if len(log.Events) != 6 || log.Last() != 9 {
		t.Fatalf("want 6 events up to 9, got %d up to %d: %+v", len(log.Events), log.Last(), log.Events)
	}
	if want := []Gap{{After: 2, Until: 9}, {After: 9, Until: 12}}; !slices.Equal(log.Gaps, want) {
		t.Fatalf("gaps %v, want %v", log.Gaps, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if log.Missed() != 10 || log.Restarts != 1 || len(refusals) != 1 || !strings.Contains(refusals[0].Error(), "past the last entry") {
		t.Fatalf("missed %d, restarts %d, refusals %v", log.Missed(), log.Restarts, refusals)
	}
	for _, c := range []struct {
		f    *fakeMaster
		want []string
	}{{first, []string{"0"}}, {second, []string{"2", "2"}}} {
		c.f.mu.Lock()
		asked := c.f.asked
		c.f.mu.Unlock()
		if !slices.Equal(asked, c.want) {
			t.Errorf("streams resumed from %v, want %v", asked, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "changes.jsonl")
	if err := log.Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(nil, nil); err == nil {
		t.Error("a recorder of no masters started")
	}
}
