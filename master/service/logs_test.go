package service

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// A log request passed on to a worker carries this master's credential
// (without TLS, the operator token), never the caller's token or cookie,
// and the worker's answer comes back with its size.
func TestWorkerLogCarriesTheMastersCredential(t *testing.T) {
	var got http.Header
	var query string
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, query = r.Header.Clone(), r.URL.RawQuery
		w.Header().Set(api.HeaderLogSize, "42")
		_, _ = io.WriteString(w, "tail")
	}))
	defer wk.Close()
	f := fsm.New()
	cmd, err := fsm.Encode(model.CmdRegisterWorker, &model.RegisterWorker{ID: "w1", HTTPAddr: strings.TrimPrefix(wk.URL, "http://"), Cores: 1, MemoryMB: 1, Time: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.ApplyCommand(1, cmd); res != nil {
		t.Fatal(res)
	}
	for _, tc := range []struct {
		operatorToken, want string
	}{{"OperatorTok-0123456789abcdef", "Bearer OperatorTok-0123456789abcdef"}, {"", ""}} {
		s := &Core{cfg: Config{Scheme: "http", OperatorToken: tc.operatorToken}, Deps: Deps{FSM: f, Workers: wk.Client()}}
		l, err := s.workerLog(context.Background(), "w1", "/v1/drivers/d/logs", LogQuery{Stream: "stderr", Offset: 7, Attempt: 2}, "d")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(l.Body)
		l.Body.Close()
		if string(b) != "tail" || l.Size != 42 || query != "attempt=2&offset=7&stream=stderr" {
			t.Fatalf("log %q size %d query %q", b, l.Size, query)
		}
		if got.Get("Authorization") != tc.want || got.Get("Cookie") != "" {
			t.Fatalf("headers to the worker with operator token %q: %v", tc.operatorToken, got)
		}
	}
}
