package master

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/pki"
)

// TestNoReadShowsTheWorkerInstance: the instance a worker registers with
// ties its heartbeats to it, so none of what a reader gets shows it:
// /v1/state, Spark's /json, the web UI's overview and worker pages, and
// the event stream, replayed or live. Heartbeats still need it.
func TestNoReadShowsTheWorkerInstance(t *testing.T) {
	const instance = "instance-Secret-0123456789abcdef"
	cfg := singleConfig(t)
	cfg.OperatorToken, cfg.SubmitToken, cfg.RaftKey, cfg.GossipKey = uiOperatorToken, uiSubmitToken, pki.NewRaftKey(), testGossipKey
	cfg.RegisterWithoutGossip = true
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitReady(t, m)
	operator := map[string]string{"Authorization": "Bearer " + uiOperatorToken}
	post := func(path string, body any) uiResponse {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, "http://"+cfg.httpAddr()+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+uiOperatorToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return uiResponse{resp.StatusCode, resp.Header, out.String()}
	}

	// A stream opened before the registration sees it live.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	live := openStream(t, ctx, cfg.httpAddr(), "kind=worker")
	post(api.PathRegisterWorker, api.RegisterWorkerRequest{ID: "w1", Instance: instance, HTTPAddr: "127.0.0.1:1", Cores: 2, MemoryMB: 1024}).
		check(t, http.StatusOK, "application/json", `"worker_id":"w1"`)
	post(api.WorkerPath("w1", "/heartbeat"), api.HeartbeatRequest{Instance: instance}).check(t, http.StatusOK, "application/json", `"registered":true`)
	post(api.WorkerPath("w1", "/heartbeat"), api.HeartbeatRequest{Instance: "a guess"}).check(t, http.StatusOK, "application/json", `"registered":false`)

	reads := map[string]string{
		"/v1/state":   uiDo(t, m, http.MethodGet, "/v1/state", nil, operator).body,
		"/json":       uiDo(t, m, http.MethodGet, "/json", nil, operator).body,
		"/":           uiDo(t, m, http.MethodGet, "/", nil, operator).body,
		"/ui/workers": uiDo(t, m, http.MethodGet, "/ui/workers/w1", nil, operator).body,
		"live events": live.worker(t, "w1"),
		// From index 0: the stream replays what the master holds.
		"replayed events": openStream(t, ctx, cfg.httpAddr(), "kind=worker&index=0").worker(t, "w1"),
	}
	for what, body := range reads {
		if !strings.Contains(body, "w1") {
			t.Errorf("%s does not show worker w1: %q", what, body)
		}
		if strings.Contains(body, instance) || strings.Contains(body, `"instance"`) {
			t.Errorf("%s shows the worker's instance: %q", what, body)
		}
	}
}

// stream is a GET /v1/events read line by line.
type stream struct{ sc *bufio.Scanner }

func openStream(t *testing.T, ctx context.Context, addr, query string) stream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+uiOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events?%s: %s", query, resp.Status)
	}
	return stream{bufio.NewScanner(resp.Body)}
}

// worker returns the data line of the first event of worker id.
func (s stream) worker(t *testing.T, id string) string {
	t.Helper()
	for s.sc.Scan() {
		if line := s.sc.Text(); strings.HasPrefix(line, "data: ") && strings.Contains(line, `"id":"`+id+`"`) {
			return line
		}
	}
	t.Fatalf("the event stream ended before an event of %s: %v", id, s.sc.Err())
	return ""
}
