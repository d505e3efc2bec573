package worker_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-project/drover/internal/devsecrets"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/worker"
)

// Without TLS, a worker with the node token serves its logs, health and
// metrics only to callers that present that token, as masters do; the
// operator token, which workers no longer hold, opens nothing.
func TestWorkerHTTPDemandsTheNodeToken(t *testing.T) {
	const node = "NodeTok-0123456789ABCDEFGHIJ"
	w, _ := newWorker(t, newFakeMaster(t), func(c *worker.Config) { c.NodeToken = node })
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer OperatorTok-0123456789abcdef", http.StatusUnauthorized},
		{"Bearer " + node + "x", http.StatusUnauthorized},
		{"Bearer " + node, http.StatusOK},
	} {
		for _, path := range []string{"/v1/health", worker.MetricsPath} {
			req, err := http.NewRequest(http.MethodGet, "http://"+w.HTTPAddr()+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with %q: %d, want %d", path, tc.auth, resp.StatusCode, tc.want)
			}
		}
	}
}

// A worker started with another worker's certificate refuses to start,
// saying how to issue its own; one whose certificate names no worker
// starts, and warns that masters will refuse it.
func TestWorkerChecksItsCertificateNamesIt(t *testing.T) {
	s, err := devsecrets.Make(filepath.Join(t.TempDir(), "secrets"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Node(pki.RoleWorker, "w2")
	if err != nil {
		t.Fatal(err)
	}
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Masters, cfg.WorkDir, cfg.Cores, cfg.MemoryMB, cfg.TLS = "w1", []string{"127.0.0.1:1"}, filepath.Join(t.TempDir(), "work"), 1, 64, w2
	if w, err := worker.New(cfg); err == nil {
		w.Close()
		t.Fatal("w1 started with w2's certificate")
	} else if !strings.Contains(err.Error(), "worker w2's; this worker is w1 (drover tls cert --role worker --name w1)") {
		t.Fatalf("error %q does not say whose certificate it is and how to make w1's", err)
	}
	if _, err := os.Stat(cfg.WorkDir); err == nil {
		t.Errorf("the refused worker made its work dir")
	}
}
