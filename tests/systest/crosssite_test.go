package systest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// browserRequest sends one plain-HTTP request as a browser, or a program,
// would: to url, under Host host ("" for the URL's own), with the given
// headers, and returns its status and body.
func browserRequest(t *testing.T, method, url, host, body string, header map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// TestNoCrossSiteWritesOnOpenCluster attacks an open cluster on loopback
// (no TLS, no tokens: what spark-submit needs, and drover dev --insecure)
// as a web page in a browser on the same machine would: a cross-site
// text/plain post of a submission to the API, to Spark REST and to the
// web UI's login (which a browser sends without asking first); the same
// bodies as text/plain without a browser's headers; and requests under a
// name of the attacker's that resolves to the node (DNS rebinding), to
// read the cluster's state and a worker's health and to submit. Each is
// refused with its status and line, and no driver enters the tables.
// Then spark-submit's own requests (application/json with its charset in
// a header of its own, or application/json;charset=UTF-8; no Origin; Host
// the address or localhost) still submit, and so does the Go client.
func TestNoCrossSiteWritesOnOpenCluster(t *testing.T) {
	c, rest := sparkRESTCluster(t, testcluster.Options{Masters: 1, Workers: 1}, "/bin/echo {{mainClass}} {{appArgs}}")
	m, w := c.Masters[0], c.Workers[0]
	base := "http://" + m.HTTP
	spark := "http://" + rest[m.ID]
	const submission = `{"token":"cross-site-1","argv":["/bin/true"],"cores":1,"memory_mb":64}`
	create := createJSON("hello")
	crossSite := map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
	plain := map[string]string{"Content-Type": "text/plain"}
	asJSON := map[string]string{"Content-Type": "application/json"}
	rebound := func(addr string) string {
		_, port, _ := net.SplitHostPort(addr)
		return "evil.example:" + port
	}
	for _, a := range []struct {
		name, method, url, host, body string
		header                        map[string]string
		status                        int
		line                          string
	}{
		{"cross-site text/plain submission", "POST", base + "/v1/drivers", "", submission, crossSite, 403, "cross-origin POST refused"},
		{"cross-site text/plain batch", "POST", base + "/v1/drivers/batch", "", `{"submissions":[` + submission + `]}`, crossSite, 403, "cross-origin POST refused"},
		{"cross-site Spark create", "POST", spark + "/v1/submissions/create", "", create, crossSite, 403, "cross-origin POST refused"},
		{"cross-site login form", "POST", base + "/ui/login", "", "token=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded",
			"Origin": "http://evil.example"}, 403, "cross-origin POST refused"},
		{"text/plain submission", "POST", base + "/v1/drivers", "", submission, plain, 415, "Content-Type: application/json"},
		{"text/plain Spark create", "POST", spark + "/v1/submissions/create", "", create, plain, 415, "Content-Type: application/json"},
		{"rebound submission", "POST", base + "/v1/drivers", rebound(m.HTTP), submission, asJSON, 421, "DNS rebinding"},
		{"rebound Spark create", "POST", spark + "/v1/submissions/create", rebound(rest[m.ID]), create, asJSON, 421, "DNS rebinding"},
		{"rebound state read", "GET", base + "/v1/state", rebound(m.HTTP), "", nil, 421, "DNS rebinding"},
		{"rebound overview page", "GET", base + "/", rebound(m.HTTP), "", nil, 421, "DNS rebinding"},
		{"rebound worker read", "GET", "http://" + w.HTTP + "/v1/health", rebound(w.HTTP), "", nil, 421, "DNS rebinding"},
		{"another address's name", "GET", base + "/v1/state", "127.0.0.1.nip.io", "", nil, 421, "DNS rebinding"},
	} {
		status, body := browserRequest(t, a.method, a.url, a.host, a.body, a.header)
		if status != a.status || !strings.Contains(body, a.line) || strings.Count(strings.TrimSpace(body), "\n") > 4 {
			t.Errorf("%s: %d %s, want %d with %q", a.name, status, body, a.status, a.line)
		}
	}
	st, err := testcluster.State(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Drivers) != 0 {
		t.Fatalf("refused requests made %d drivers", len(st.Drivers))
	}

	// spark-submit's own requests, and the Go client's, go through.
	_, port, _ := net.SplitHostPort(rest[m.ID])
	for _, h := range []struct {
		host   string
		header map[string]string
	}{
		{"", map[string]string{"Content-Type": "application/json", "charset": "utf-8"}},
		{"localhost:" + port, map[string]string{"Content-Type": "application/json;charset=UTF-8"}},
	} {
		status, body := browserRequest(t, "POST", spark+"/v1/submissions/create", h.host, create, h.header)
		var res restsubmit.CreateSubmissionResponse
		if status != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || !res.Success {
			t.Fatalf("spark-submit's create (Host %q, %v): %d %s", h.host, h.header, status, body)
		}
	}
	id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}})
	c.WaitDriver(id, 30*time.Second, "FINISHED", isState(model.DriverFinished))
}
