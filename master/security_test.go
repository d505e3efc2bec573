package master

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
)

// A client IP gets at most MaxSubmitsPerClient submissions in flight; more
// are answered 429 with Retry-After, other IPs and forwarded requests are
// not held back, and the slots come back when the submissions end.
func TestLimitSubmitsPerClient(t *testing.T) {
	m := &Master{submitting: newInflight(2)}
	release := make(chan struct{})
	var entered sync.WaitGroup
	h := m.limitSubmits(func(w http.ResponseWriter, r *http.Request) {
		entered.Done()
		<-release
		w.WriteHeader(http.StatusOK)
	})
	send := func(ip string, forwarded bool) chan int {
		r := httptest.NewRequest("POST", "/v1/drivers", nil)
		r.RemoteAddr = ip + ":5000"
		if forwarded {
			r.Header.Set(api.HeaderForwarded, "m2")
		}
		out := make(chan int, 1)
		go func() {
			w := httptest.NewRecorder()
			h(w, r)
			if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			out <- w.Code
		}()
		return out
	}
	entered.Add(4)
	held := []chan int{send("10.0.0.1", false), send("10.0.0.1", false), send("10.0.0.2", false), send("10.0.0.1", true)}
	entered.Wait()
	if got := <-send("10.0.0.1", false); got != http.StatusTooManyRequests {
		t.Fatalf("third submission in flight from one IP: %d, want 429", got)
	}
	close(release)
	for _, c := range held {
		if got := <-c; got != http.StatusOK {
			t.Fatalf("held submission: %d", got)
		}
	}
	entered.Add(1)
	if got := <-send("10.0.0.1", false); got != http.StatusOK {
		t.Fatalf("after the others ended: %d, want 200", got)
	}
}
