package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
)

// A /v1 path asked with a method it does not take is 405, not 404: the
// Allow header lists the methods it takes (HEAD with GET) and the body is
// the error table's, code method_not_allowed, one line. Every /v1 route,
// JSON or not, is asked with PATCH, which none takes; the namespace,
// token and schedule routes with each method they lack, against their whole Allow. A
// path no route has stays 404. No handler runs: the refusal is the
// router's.
func TestWrongMethodIs405(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, Config{})
	ask := func(method, path string) (*httptest.ResponseRecorder, api.Error) {
		t.Helper()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		var e api.Error
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s %s: body %q is not an error: %v", method, path, w.Body, err)
		}
		return w, e
	}
	check := func(method, path string, allow func(string) bool, what string) {
		t.Helper()
		w, e := ask(method, path)
		if w.Code != http.StatusMethodNotAllowed || e.Code != api.CodeMethodNotAllowed || strings.Contains(e.Error, "\n") ||
			!allow(w.Header().Get("Allow")) || !strings.Contains(e.Error, w.Header().Get("Allow")) {
			t.Errorf("%s %s: %d, Allow %q, %+v; want 405 %s, Allow %s, one line naming it", method, path, w.Code, w.Header().Get("Allow"), e,
				api.CodeMethodNotAllowed, what)
		}
	}
	routes := []api.Route{api.V1DriverLogs, api.V1ExecutorLogs, api.V1WatchApp, api.V1Events, api.V1SaveSnapshot, api.V1RestoreSnapshot,
		api.V1Upload, api.V1Blob, api.V1Health.Route}
	for _, e := range service.Routes() {
		routes = append(routes, e.Describe().Route)
	}
	for _, r := range routes {
		path := strings.NewReplacer("{id}", "x", "{eid}", "1").Replace(r.Pattern)
		check(http.MethodPatch, path, func(allow string) bool { return slices.Contains(strings.Split(allow, ", "), r.Method) },
			"naming "+r.Method)
	}
	for _, c := range []struct {
		path  string
		allow string
	}{
		{api.V1Namespace.Path("etl"), "GET, HEAD, PUT, DELETE"},
		{api.PathNamespaces, "GET, HEAD"},
		{api.PathACLTokens, "GET, HEAD, POST"},
		{api.V1RevokeACLToken.Path("acc"), "DELETE"},
		// Under GET /v1/drivers/{id}, which would take them for IDs.
		{api.PathKillAllDrivers, "POST"},
		{api.PathSubmitBatch, "POST"},
		{api.PathSchedules, "GET, HEAD, POST"},
		{api.V1Schedule.Path("nightly"), "GET, HEAD, DELETE"},
		{api.V1RunSchedule.Path("nightly"), "POST"},
		{api.V1SuspendSchedule.Path("nightly"), "POST"},
	} {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			if strings.Contains(c.allow, m) {
				continue
			}
			check(m, c.path, func(allow string) bool { return allow == c.allow }, c.allow)
		}
	}
	if w, e := ask(http.MethodGet, "/v1/nosuch"); w.Code != http.StatusNotFound || e.Code != api.CodeNotFound || w.Header().Get("Allow") != "" {
		t.Errorf("GET /v1/nosuch: %d, %+v, Allow %q; want 404 not_found", w.Code, e, w.Header().Get("Allow"))
	}
}
