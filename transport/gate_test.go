package transport

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
)

// request is a GET or POST to Host host with the given headers.
func request(method, host string, header map[string]string) *http.Request {
	r := httptest.NewRequest(method, "http://node/v1/drivers", nil)
	r.Host = host
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

// An open node answers to its bind address, localhost, 127.0.0.1 and
// [::1] and the names it is given, with or without a port, in any case;
// any other Host, a name that merely resolves to it included (DNS
// rebinding), is refused as misdirected. A node that does not check Host
// takes any.
func TestGateHost(t *testing.T) {
	g, err := NewGate(GateConfig{CheckHost: true, BindIP: "127.4.5.6", AllowedHosts: []string{"drover.example", "10.9.9.9"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"127.4.5.6:7102", "127.4.5.6", "localhost:7102", "LocalHost", "localhost.", "127.0.0.1:80",
		"[::1]:7102", "[::1]", "Drover.Example:7102", "drover.example.", "10.9.9.9:1"} {
		if err := g.Check(request(http.MethodGet, h, nil)); err != nil {
			t.Errorf("Host %q refused: %v", h, err)
		}
	}
	for _, h := range []string{"evil.example", "evil.example:7102", "127.4.5.7:7102", "", "localhost.evil.example",
		"[::2]:7102", "drover.example.evil", "127.4.5.6.nip.io"} {
		err := g.Check(request(http.MethodGet, h, nil))
		if code, status := api.CodeOf(err); !errors.Is(err, api.ErrMisdirected) || status != http.StatusMisdirectedRequest ||
			code != api.CodeMisdirected || !strings.Contains(err.Error(), "DNS rebinding") {
			t.Errorf("Host %q: %v (%s %d), want a 421 naming DNS rebinding", h, err, code, status)
		}
	}

	wide, err := NewGate(GateConfig{CheckHost: true, BindIP: "0.0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := wide.Check(request(http.MethodGet, "10.1.2.3:7102", nil)); err != nil {
		t.Errorf("an address of a node bound to every address: %v", err)
	}
	if err := wide.Check(request(http.MethodGet, "evil.example:7102", nil)); !errors.Is(err, api.ErrMisdirected) {
		t.Errorf("a name at a node bound to every address: %v", err)
	}

	off, err := NewGate(GateConfig{BindIP: "127.4.5.6"})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Check(request(http.MethodGet, "evil.example", nil)); err != nil {
		t.Errorf("a node that does not check Host refused one: %v", err)
	}
}

// A write that a browser says another site sent is refused 403, whatever
// the node's Host check; programs, which send no Sec-Fetch-Site or
// Origin, the node's own pages and every read pass.
func TestGateCrossOrigin(t *testing.T) {
	g, err := NewGate(GateConfig{BindIP: "127.4.5.6"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method string
		header map[string]string
		ok     bool
	}{
		{http.MethodPost, nil, true},
		{http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
		{http.MethodPost, map[string]string{"Origin": "http://127.4.5.6:7102"}, true},
		{http.MethodPost, map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-site"}, false},
		{http.MethodPut, map[string]string{"Origin": "https://evil.example"}, false},
		{http.MethodDelete, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, false},
		{http.MethodGet, map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{http.MethodHead, map[string]string{"Origin": "https://evil.example"}, true},
	} {
		err := g.Check(request(c.method, "127.4.5.6:7102", c.header))
		if c.ok && err != nil {
			t.Errorf("%s %v refused: %v", c.method, c.header, err)
		}
		if _, status := api.CodeOf(err); !c.ok && (status != http.StatusForbidden || !strings.Contains(err.Error(), "cross-origin "+c.method)) {
			t.Errorf("%s %v: %v (%d), want 403 cross-origin", c.method, c.header, err, status)
		}
	}
}

// A refused request is answered by the listener's own writer on a
// connection that closes, and reaches nothing behind the gate.
func TestGateWrap(t *testing.T) {
	g, err := NewGate(GateConfig{CheckHost: true, BindIP: "127.4.5.6"})
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }), func(w http.ResponseWriter, err error) {
		_, status := api.CodeOf(err)
		http.Error(w, err.Error(), status)
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request(http.MethodGet, "evil.example", nil))
	if rec.Code != http.StatusMisdirectedRequest || rec.Header().Get("Connection") != "close" || reached != 0 {
		t.Fatalf("refused: %d %v, handler reached %d times", rec.Code, rec.Header(), reached)
	}
	h.ServeHTTP(httptest.NewRecorder(), request(http.MethodGet, "localhost", nil))
	if reached != 1 {
		t.Fatalf("a request the gate lets pass reached the handler %d times", reached)
	}
}

// --allowed-hosts takes host names and addresses, without port, scheme or
// pattern.
func TestCheckAllowedHosts(t *testing.T) {
	if err := CheckAllowedHosts([]string{"drover.example", "m1", "m-1.rack_2.example.", "10.0.0.1", "::1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "drover.example:7102", "http://drover.example", "*.example", "-x.example", "a..b", "[::1]"} {
		if err := CheckAllowedHosts([]string{"ok.example", bad}); err == nil || !strings.Contains(err.Error(), "--allowed-hosts") {
			t.Errorf("%q: %v", bad, err)
		}
		if _, err := NewGate(GateConfig{CheckHost: true, AllowedHosts: []string{bad}}); err == nil {
			t.Errorf("NewGate took %q", bad)
		}
	}
}
