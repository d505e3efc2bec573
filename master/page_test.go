package master

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
)

const (
	uiOperatorToken = "UiOperatorToken-0123456789"
	uiSubmitToken   = "UiSubmitToken-abcdefghijkl"
)

// startUIMaster starts a single-voter master on 127.0.0.1 with both
// tokens and no TLS, and waits until it is the ready leader.
func startUIMaster(t *testing.T) *Master {
	cfg := singleConfig(t)
	cfg.OperatorToken, cfg.SubmitToken, cfg.RaftKey, cfg.GossipKey = uiOperatorToken, uiSubmitToken, pki.NewRaftKey(), testGossipKey
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitReady(t, m)
	return m
}

// uiResponse is one answer, read whole.
type uiResponse struct {
	status int
	header http.Header
	body   string
}

// uiDo sends a request to m without following redirects; the header
// entries are set on it (Cookie, Authorization, Sec-Fetch-Site ...).
func uiDo(t *testing.T, m *Master, method, path string, form url.Values, header map[string]string) uiResponse {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+m.cfg.httpAddr()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return uiResponse{resp.StatusCode, resp.Header, string(b)}
}

func (r uiResponse) check(t *testing.T, status int, contentType string, want ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %q", r.status, status, r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), contentType) {
		t.Fatalf("Content-Type %q, want %s", r.header.Get("Content-Type"), contentType)
	}
	for _, w := range want {
		if !strings.Contains(r.body, w) {
			t.Fatalf("body lacks %q: %q", w, r.body)
		}
	}
}

// The UI's pages need Read access like the API; a browser logs in with a
// token kept in a cookie that reads and does nothing else.
func TestUILoginCookie(t *testing.T) {
	m := startUIMaster(t)
	const html = "text/html"
	cookie := map[string]string{"Cookie": auth.CookieName + "=" + uiOperatorToken}

	// Without credentials a page is the login form; the API stays JSON.
	uiDo(t, m, "GET", "/", nil, nil).check(t, http.StatusUnauthorized, html,
		`action="/ui/login"`, `name="next" value="/"`, "needs read access: log in")
	uiDo(t, m, "GET", "/ui/workers/w1?refresh=0", nil, nil).check(t, http.StatusUnauthorized, html,
		`name="next" value="/ui/workers/w1?refresh=0"`)
	uiDo(t, m, "GET", "/v1/state", nil, nil).check(t, http.StatusUnauthorized, "application/json")
	uiDo(t, m, "GET", "/ui/login", nil, nil).check(t, http.StatusOK, html, `type="password"`)

	// Logging in checks the token.
	for _, tc := range []struct {
		token  string
		status int
		want   string
	}{
		{"short", http.StatusBadRequest, "That is not a token"},
		{"NotThisClustersToken-0123", http.StatusForbidden, "not one of this cluster"},
		{uiDriverToken(t), http.StatusForbidden, "cannot read the cluster"},
	} {
		r := uiDo(t, m, "POST", "/ui/login", url.Values{"token": {tc.token}, "next": {"/"}}, nil)
		r.check(t, tc.status, html, tc.want)
		if r.header.Get("Set-Cookie") != "" || strings.Contains(r.body, tc.token) {
			t.Fatalf("refused login of %q set a cookie or repeats the token", tc.token)
		}
	}
	// Another site cannot log a visitor in: the listener refuses the post
	// before the page sees it.
	r := uiDo(t, m, "POST", "/ui/login", url.Values{"token": {uiSubmitToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	r.check(t, http.StatusForbidden, "application/json", "cross-origin POST refused")
	if r.header.Get("Set-Cookie") != "" {
		t.Fatal("a cross-site login set the cookie")
	}

	// A good token sets the cookie and goes where the form said, if that
	// is a page of this master.
	for next, want := range map[string]string{
		"/ui/workers/w1?refresh=0": "/ui/workers/w1?refresh=0",
		"//evil.example/":          "/",
		"https://evil.example/":    "/",
		"/v1/state":                "/",
		"":                         "/",
	} {
		r := uiDo(t, m, "POST", "/ui/login", url.Values{"token": {" " + uiSubmitToken + "\n"}, "next": {next}},
			map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + m.cfg.httpAddr()})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Fatalf("login with next %q: %d to %q, want 303 to %q", next, r.status, r.header.Get("Location"), want)
		}
		c, err := http.ParseSetCookie(r.header.Get("Set-Cookie"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != auth.CookieName || c.Value != uiSubmitToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode ||
			c.Path != "/" || c.Secure || c.MaxAge != 0 {
			t.Fatalf("cookie %+v", c)
		}
	}

	// The cookie reads pages and the API, and offers to log out.
	uiDo(t, m, "GET", "/", nil, cookie).check(t, http.StatusOK, html, "Cluster overview", `action="/ui/logout"`, "m1 (Leader)")
	uiDo(t, m, "GET", "/v1/state", nil, cookie).check(t, http.StatusOK, "application/json")

	// It never writes, even holding the operator token.
	sub, _ := json.Marshal(api.SubmitRequest{Token: "ui-test-submission-1", DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}})
	before := m.fsm.Index()
	req := func(header map[string]string) uiResponse {
		hr, err := http.NewRequest("POST", "http://"+m.cfg.httpAddr()+"/v1/drivers", bytes.NewReader(sub))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			hr.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return uiResponse{resp.StatusCode, resp.Header, string(b)}
	}
	req(cookie).check(t, http.StatusForbidden, "application/json", auth.CookieName)
	if m.fsm.Index() != before {
		t.Fatal("a request with the cookie changed the tables")
	}

	// A driver submitted with a bearer token shows on its page.
	r = req(map[string]string{"Authorization": "Bearer " + uiSubmitToken})
	r.check(t, http.StatusOK, "application/json")
	var sr api.SubmitResponse
	if err := json.Unmarshal([]byte(r.body), &sr); err != nil {
		t.Fatal(err)
	}
	uiDo(t, m, "GET", "/ui/drivers/"+sr.DriverID, nil, cookie).check(t, http.StatusOK, html, sr.DriverID, "SUBMITTED", "no ALIVE worker")
	uiDo(t, m, "GET", "/", nil, cookie).check(t, http.StatusOK, html, sr.DriverID)
	uiDo(t, m, "GET", "/ui/drivers/"+sr.DriverID+"/logs", nil, cookie).check(t, http.StatusNotFound, html, "not been placed")
	uiDo(t, m, "GET", "/ui/drivers/"+sr.DriverID+"/logs?stream=stdin", nil, cookie).check(t, http.StatusBadRequest, html, "stdout or stderr")

	// Unknown and malformed IDs are pages too.
	for path, status := range map[string]int{
		"/ui/drivers/driver-20990101000000-9":                        http.StatusNotFound,
		"/ui/drivers/..%2f..%2fetc":                                  http.StatusBadRequest,
		"/ui/apps/app-20990101000000-1":                              http.StatusNotFound,
		"/ui/apps/app-20990101000000-1/executors/0/logs":             http.StatusNotFound,
		"/ui/apps/not-an-app":                                        http.StatusBadRequest,
		"/ui/workers/w9":                                             http.StatusNotFound,
		"/ui/workers/.hidden":                                        http.StatusBadRequest,
		"/ui/nothing-here":                                           http.StatusNotFound,
		"/ui/drivers/driver-20990101000000-9/logs?attempt=1":         http.StatusNotFound,
		"/ui/drivers/" + sr.DriverID + "/logs?attempt=2":             http.StatusNotFound,
		"/ui/apps/app-20990101000000-1/executors/x/logs":             http.StatusNotFound,
		"/ui/apps/app-20990101000000-1/executors/0/logs?x=<marquee>": http.StatusNotFound,
	} {
		r := uiDo(t, m, "GET", path, nil, cookie)
		r.check(t, status, html)
		if r.header.Get("Content-Security-Policy") == "" || strings.Contains(r.body, "<marquee>") {
			t.Fatalf("%s: no CSP, or markup from the URL in the page", path)
		}
	}

	// Logging out clears the cookie.
	r = uiDo(t, m, "POST", "/ui/logout", url.Values{}, cookie)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login" {
		t.Fatalf("logout: %d to %q", r.status, r.header.Get("Location"))
	}
	if c, err := http.ParseSetCookie(r.header.Get("Set-Cookie")); err != nil || c.Name != auth.CookieName || c.Value != "" || c.MaxAge >= 0 {
		t.Fatalf("logout cookie %+v (%v)", c, err)
	}

	// A stale cookie (a rotated token) is refused with the login form.
	uiDo(t, m, "GET", "/", nil, map[string]string{"Cookie": auth.CookieName + "=OldRotatedToken-0123456789"}).check(t,
		http.StatusForbidden, html, `action="/ui/login"`, "log in again")
}

// uiDriverToken is a driver token of startUIMaster's masters.
func uiDriverToken(t *testing.T) string {
	g, err := auth.New(auth.Config{OperatorToken: uiOperatorToken, SubmitToken: uiSubmitToken})
	if err != nil {
		t.Fatal(err)
	}
	return g.DriverToken("driver-20240101000000-1", 1)
}

// Spark's master JSON is served with the access of /v1/state (a token or
// the UI's cookie), in JSON whatever the answer, and names the Spark REST
// listener as the master's URL when there is one.
func TestSparkMasterJSON(t *testing.T) {
	m := startUIMaster(t)
	uiDo(t, m, "GET", "/json", nil, nil).check(t, http.StatusUnauthorized, "application/json", `"code":"unauthenticated"`)
	bearer := map[string]string{"Authorization": "Bearer " + uiSubmitToken}
	r := uiDo(t, m, "GET", "/json/", nil, bearer)
	r.check(t, http.StatusOK, "application/json", `"status":"ALIVE"`, `"aliveworkers":0`)
	var doc struct{ URL string }
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil || doc.URL != "http://"+m.cfg.httpAddr() {
		t.Fatalf("url %q (%v), want this master's API without a Spark REST listener", doc.URL, err)
	}
	cookie := map[string]string{"Cookie": auth.CookieName + "=" + uiSubmitToken}
	uiDo(t, m, "GET", "/json/status", nil, cookie).check(t, http.StatusOK, "application/json", `{"status":"ALIVE"}`)
	uiDo(t, m, "GET", "/json/statuss", nil, bearer).check(t, http.StatusNotFound, "application/json", `"code":"not_found"`, `no field \"statuss\"`)

	m.cfg.SparkRESTPort = 6066
	if got := m.sparkURL(); got != "spark://127.0.0.1:6066" {
		t.Fatalf("url with a Spark REST listener: %q", got)
	}
}
