package master_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// program returns the argv of a program of exactly size bytes
// (model.SubmitDriver.ProgramSize) with no name, environment or artifact.
func program(size int) []string {
	return []string{"/bin/true", strings.Repeat("a", size-len("/bin/true"))}
}

// A program of --max-program-size bytes is taken, one byte more is
// refused 413 naming the bound and the size, before anything is
// committed: alone, in a batch (where it is refused alone and the others
// are committed), through Spark's REST protocol, and as an app's executor
// program.
func TestProgramSizeBound(t *testing.T) {
	const limit = 4096
	ports, err := freeport.Get("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		cfg.MaxProgramSize = limit
		cfg.SparkRESTPort = ports[0]
	})
	cl, ctx := c.Client(), c.Context()
	over := func(what string, err error, size int) {
		t.Helper()
		want := fmt.Sprintf("of %d bytes exceeds --max-program-size of %d bytes", size, limit)
		if !errors.Is(err, api.ErrTooLarge) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of %d bytes: %v, want 413 too_large saying %q", what, size, err, want)
		}
	}
	at := submitReq()
	at.Argv = program(limit)
	if _, err := cl.Submit(ctx, at); err != nil {
		t.Fatalf("a program at the bound: %v", err)
	}
	// Every string of the program counts: a name, a user, the environment
	// and an artifact, at the bound and past it.
	mixed := submitReq()
	mixed.Name, mixed.User, mixed.Env = "n", "etl", map[string]string{"K": "v"}
	mixed.Artifacts = []model.Artifact{{Source: "https://example.com/a.jar"}}
	norm, err := model.NormalizeArtifact(mixed.Artifacts[0])
	if err != nil {
		t.Fatal(err)
	}
	rest := limit - 6 - (&model.SubmitDriver{Artifacts: []model.Artifact{norm}}).ProgramSize()
	mixed.Argv = program(rest)
	if _, err := cl.Submit(ctx, mixed); err != nil {
		t.Fatalf("a named program with a user, environment and artifact at the bound: %v", err)
	}

	// A Spark REST create becomes a program through the launcher
	// template: one argument of the right length puts it at the bound.
	status, body := sparkCreateArg(t, ports[0], "x")
	var created struct{ SubmissionID string }
	if status != http.StatusOK || json.Unmarshal(body, &created) != nil || created.SubmissionID == "" {
		t.Fatalf("Spark REST create: %d %s", status, body)
	}
	d, err := cl.Driver(ctx, created.SubmissionID)
	if err != nil {
		t.Fatal(err)
	}
	spark := limit - (&model.SubmitDriver{Name: d.Name, Argv: d.Argv, Env: d.Env, Artifacts: d.Artifacts, Resources: d.Resources}).ProgramSize()
	if status, body := sparkCreateArg(t, ports[0], "x"+strings.Repeat("y", spark)); status != http.StatusOK || !bytes.Contains(body, []byte(`"success": true`)) {
		t.Fatalf("Spark REST create at the bound: %d %s", status, body)
	}

	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status, body = sparkCreateArg(t, ports[0], "x"+strings.Repeat("y", spark+1))
	if want := fmt.Sprintf("program of %d bytes exceeds --max-program-size of %d bytes", limit+1, limit); status != http.StatusRequestEntityTooLarge ||
		!bytes.Contains(body, []byte(want)) {
		t.Errorf("Spark REST create past the bound: %d %s, want 413 saying %q", status, body, want)
	}
	mixed.Token, mixed.Argv = client.NewToken(), program(rest+1)
	_, err = cl.Submit(ctx, mixed)
	over("a submission", err, limit+1)

	var batch api.SubmitBatchResponse
	past := submitReq()
	past.Argv = program(limit + 1)
	if err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{past}}, &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Results) != 1 || batch.Results[0].Error == nil || batch.Results[0].Error.Code != api.CodeTooLarge {
		t.Fatalf("a batch of one program past the bound: %+v", batch.Results)
	}
	over("a batch's submission", batch.Results[0].Error.Err(http.StatusRequestEntityTooLarge), limit+1)

	app := api.RegisterAppRequest{Token: client.NewToken(), CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: program(limit + 1)}
	over("an executor program", cl.Do(ctx, http.MethodPost, api.PathApps, app, nil), limit+1)

	assertNothingCommitted(t, ctx, cl, before)

	// The rest of a batch goes on without the submission past the bound.
	good := submitReq()
	if err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{past, good}}, &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Results) != 2 || batch.Results[0].Error == nil || batch.Results[1].Error != nil || batch.Results[1].DriverID == "" {
		t.Fatalf("a batch of a program past the bound and one within: %+v", batch.Results)
	}
	app.Argv = program(limit)
	if err := cl.Do(ctx, http.MethodPost, api.PathApps, app, nil); err != nil {
		t.Fatalf("an executor program at the bound: %v", err)
	}
}

// sparkCreateArg sends a Spark REST create whose one application argument is
// arg to the listener on port, and returns the answer's status and body.
func sparkCreateArg(t *testing.T, port int, arg string) (int, []byte) {
	t.Helper()
	args, _ := json.Marshal([]string{arg})
	body := `{"action":"CreateSubmissionRequest","clientSparkVersion":"3.5.1","appResource":"file:/jobs/pi.jar",` +
		`"mainClass":"Pi","appArgs":` + string(args) + `,"sparkProperties":{"spark.app.name":"pi"},"environmentVariables":{}}`
	u := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/v1/submissions/create"
	resp, err := http.Post(u, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
