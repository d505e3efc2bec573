package master

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
)

// The overview's namespaces table is the master's namespaces: default
// and one an operator applied, with its weight and quota.
func TestOverviewListsNamespaces(t *testing.T) {
	m := startUIMaster(t)
	cl, err := client.New([]string{m.HTTPAddr()}, client.Options{Token: uiOperatorToken, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cores, weight := 8, 3.0
	if _, err := cl.ApplyNamespace(ctx, "etl", api.NamespaceRequest{Cores: &cores, Weight: &weight}); err != nil {
		t.Fatal(err)
	}
	uiDo(t, m, "GET", "/?refresh=0", nil, map[string]string{"Authorization": "Bearer " + uiOperatorToken}).check(t, http.StatusOK, "text/html",
		`<table id="namespaces">`, `<td>default</td><td class="num">1</td>`, `<td>etl</td><td class="num">3</td>`, "8 cores")
}
