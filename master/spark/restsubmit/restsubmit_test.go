package restsubmit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// sparkSubmitJSON is a CreateSubmissionRequest as Spark 3.5's
// RestSubmissionClient writes it for
//
//	spark-submit --deploy-mode cluster --master spark://m1:6066,m2:6066 \
//	  --supervise --driver-memory 2g --driver-cores 2 --name wordcount \
//	  --class com.example.WordCount hdfs://nn/jobs/wordcount.jar in out
//
// byte for byte in form: Jackson's indented output with its " : "
// separators and fields in alphabetical order (SubmitRestProtocolMessage),
// the properties spark-submit sets for a cluster-mode submission, and the
// SPARK_* environment of the submitting shell after the client's filter.
const sparkSubmitJSON = `{
  "action" : "CreateSubmissionRequest",
  "appArgs" : [ "hdfs://nn/in", "hdfs://nn/out" ],
  "appResource" : "hdfs://nn/jobs/wordcount.jar",
  "clientSparkVersion" : "3.5.1",
  "environmentVariables" : {
    "SPARK_USER" : "etl",
    "SPARK_SCALA_VERSION" : "2.12",
    "SPARK_LOCAL_IP" : "10.1.2.3"
  },
  "mainClass" : "com.example.WordCount",
  "sparkProperties" : {
    "spark.jars" : "hdfs://nn/jobs/wordcount.jar",
    "spark.driver.supervise" : "true",
    "spark.app.name" : "wordcount",
    "spark.driver.memory" : "2g",
    "spark.submit.deployMode" : "cluster",
    "spark.master" : "spark://m1:6066,m2:6066",
    "spark.driver.cores" : "2",
    "spark.app.submitTime" : "1767225600000",
    "spark.submit.pyFiles" : ""
  }
}`

// minimalJSON has only what Spark's validation requires, as a Spark 1.x
// client or curl sends it; it also carries the SPARK_ENV_LOADED and
// SPARK_HOME an old client let through.
const minimalJSON = `{
  "action" : "CreateSubmissionRequest",
  "appResource" : "file:/jobs/pi.jar",
  "clientSparkVersion" : "1.6.3",
  "environmentVariables" : { "SPARK_ENV_LOADED" : "1", "SPARK_HOME" : "/opt/spark-1.6" },
  "mainClass" : "Pi",
  "sparkProperties" : { "spark.app.name" : "pi" }
}`

// fakeBackend is a master's service in memory.
type fakeBackend struct {
	mu sync.Mutex
	// deny, when set, is every method's refusal of access, as the
	// service's admission answers.
	deny      error
	submitErr error
	driverErr error
	killErr   error
	// allErr is the refusal of KillAllDrivers and ClearCompleted.
	allErr error
	// leader is the leader check Health reports.
	leader    api.Check
	submitted []api.SubmitRequest
	drivers   map[string]*model.Driver
	workers   map[string]string
	// calls counts calls that got past access: a refused or malformed
	// request must reach none.
	calls int
}

func newFake() *fakeBackend {
	return &fakeBackend{drivers: map[string]*model.Driver{}, workers: map[string]string{"w1": "10.0.0.11:7402"}}
}

// enter counts a call that the access check lets through.
func (f *fakeBackend) enter() error {
	if f.deny != nil {
		return f.deny
	}
	f.calls++
	return nil
}

func (f *fakeBackend) SubmitDriver(_ context.Context, _ auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return api.SubmitResponse{}, err
	}
	if f.submitErr != nil {
		return api.SubmitResponse{}, f.submitErr
	}
	f.submitted = append(f.submitted, req)
	id := fmt.Sprintf("driver-20260101000000-%04d", len(f.submitted)-1)
	f.drivers[id] = &model.Driver{ID: id, State: model.DriverSubmitted, Attempt: 1, Attempts: []model.Attempt{}}
	return api.SubmitResponse{DriverID: id}, nil
}

func (f *fakeBackend) Driver(_ context.Context, _ auth.Caller, id string, _ service.Read) (*model.Driver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return nil, err
	}
	if f.driverErr != nil {
		return nil, f.driverErr
	}
	d, ok := f.drivers[id]
	if !ok {
		return nil, api.Errorf(model.ErrUnknownDriver, "unknown driver: %s", id)
	}
	c := *d
	return &c, nil
}

func (f *fakeBackend) KillDriver(_ context.Context, _ auth.Caller, id string) (api.KillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return api.KillResponse{}, err
	}
	if f.killErr != nil {
		return api.KillResponse{}, f.killErr
	}
	d, ok := f.drivers[id]
	switch {
	case !ok:
		return api.KillResponse{}, api.Errorf(model.ErrUnknownDriver, "unknown driver: %s", id)
	case d.State == model.DriverKilled:
	case d.State.Terminal():
		return api.KillResponse{}, api.Errorf(model.ErrDriverEnded, "driver already ended: %s is %s", id, d.State)
	default:
		d.State, d.Message = model.DriverKilled, "killed by a client request"
	}
	return api.KillResponse{DriverID: id}, nil
}

func (f *fakeBackend) KillAllDrivers(_ context.Context, _ auth.Caller) (api.KillAllResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return api.KillAllResponse{}, err
	}
	if f.allErr != nil {
		return api.KillAllResponse{}, f.allErr
	}
	out := api.KillAllResponse{DriverIDs: []string{}}
	for _, id := range slices.Sorted(maps.Keys(f.drivers)) {
		if d := f.drivers[id]; !d.State.Terminal() {
			d.State, d.Message = model.DriverKilled, "killed by kill-all"
			out.DriverIDs = append(out.DriverIDs, id)
		}
	}
	return out, nil
}

func (f *fakeBackend) ClearCompleted(_ context.Context, _ auth.Caller) (api.ClearCompletedResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return api.ClearCompletedResponse{}, err
	}
	if f.allErr != nil {
		return api.ClearCompletedResponse{}, f.allErr
	}
	out := api.ClearCompletedResponse{DriverIDs: []string{}, AppIDs: []string{}}
	for id, d := range f.drivers {
		if d.State.Terminal() {
			delete(f.drivers, id)
			out.DriverIDs = append(out.DriverIDs, id)
		}
	}
	return out, nil
}

// Health needs no credential, so it neither checks deny nor counts.
func (f *fakeBackend) Health(context.Context) api.Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.Health{ID: "m2", Checks: []api.Check{f.leader, {Name: api.CheckQuorum, OK: true}}}
}

func (f *fakeBackend) Worker(_ context.Context, _ auth.Caller, id string, _ service.Read) (*model.Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	addr, ok := f.workers[id]
	if !ok {
		return nil, api.Errorf(model.ErrUnknownWorker, "unknown worker %s", id)
	}
	return &model.Worker{ID: id, HTTPAddr: addr}, nil
}

func (f *fakeBackend) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// fakeGuard answers every request's caller with caller (nobody in
// particular, or the error) and every check of a credential with
// credential.
type fakeGuard struct{ caller, credential error }

func (g fakeGuard) Caller(*http.Request) (auth.Caller, error) { return auth.Caller{}, g.caller }
func (g fakeGuard) CheckCredential(auth.Identity) error       { return g.credential }

// anyone is a listener's view of every caller: nobody in particular, and
// enough.
var anyone = fakeGuard{}

// sparkRequest is a request as Spark's RestSubmissionClient sends it: a
// create goes with Content-Type application/json and the charset in a
// header of its own (postJson); the other actions carry no body.
func sparkRequest(method, path string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, path, body)
	if strings.HasSuffix(path, "/create") {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("charset", "utf-8")
	}
	return req
}

func newTestHandler(t *testing.T, f *fakeBackend, template ...string) *Handler {
	t.Helper()
	if len(template) == 0 {
		template = []string{"/opt/spark/bin/spark-submit", "--class", "{{mainClass}}", "{{appResource}}", "{{appArgs}}"}
	}
	l, err := NewLauncher(template)
	if err != nil {
		t.Fatal(err)
	}
	return NewHandler(f, anyone, l)
}

type answer struct {
	status int
	header http.Header
	fields map[string]any
	raw    string
}

func do(t *testing.T, h http.Handler, method, path, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sparkRequest(method, path, rd))
	a := answer{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: Content-Type %q, want application/json (Spark's client reads error bodies only then)", method, path, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &a.fields); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, path, err, a.raw)
	}
	return a
}

// keys are the answer's field names, sorted.
func (a answer) keys() []string { return slices.Sorted(maps.Keys(a.fields)) }

func (a answer) str(k string) string { s, _ := a.fields[k].(string); return s }

// isError checks an answer is an ErrorResponse of Spark's shape with the
// given status: exactly action, message and serverSparkVersion, plus
// highestProtocolVersion on 468 answers only.
func (a answer) isError(t *testing.T, status int) {
	t.Helper()
	want := []string{"action", "message", "serverSparkVersion"}
	if status == StatusUnknownProtocolVersion {
		want = []string{"action", "highestProtocolVersion", "message", "serverSparkVersion"}
	}
	if a.status != status || a.str("action") != ActionErrorResponse || !slices.Equal(a.keys(), want) ||
		a.str("message") == "" || a.str("serverSparkVersion") != ServerSparkVersion {
		t.Fatalf("got %d %s; want %d ErrorResponse with fields %v", a.status, a.raw, status, want)
	}
	if status == StatusUnknownProtocolVersion && a.str("highestProtocolVersion") != ProtocolVersion {
		t.Fatalf("highestProtocolVersion %q, want %q", a.str("highestProtocolVersion"), ProtocolVersion)
	}
}

func TestCreateFromSparkSubmit(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	a := do(t, h, http.MethodPost, "/v1/submissions/create", sparkSubmitJSON)
	if a.status != http.StatusOK || a.str("action") != ActionCreateSubmissionResponse || a.fields["success"] != true ||
		a.str("submissionId") != "driver-20260101000000-0000" || a.str("serverSparkVersion") != ServerSparkVersion ||
		!slices.Equal(a.keys(), []string{"action", "message", "serverSparkVersion", "submissionId", "success"}) {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	got := f.submitted[0]
	want := api.SubmitRequest{
		Token: got.Token,
		Name:  "wordcount",
		DriverSpec: model.DriverSpec{
			Argv: []string{"/opt/spark/bin/spark-submit", "--class", "com.example.WordCount",
				"hdfs://nn/jobs/wordcount.jar", "hdfs://nn/in", "hdfs://nn/out"},
			Env:       map[string]string{"SPARK_USER": "etl", "SPARK_SCALA_VERSION": "2.12"},
			Cores:     2,
			MemoryMB:  2048 + 384,
			Supervise: true,
		},
		// SPARK_LOCAL_IP names the submitting machine: dropped.
		// 2g of heap and Spark's least overhead, 384 MiB (10 % is 204).
	}
	if !sameSubmit(got, want) || !strings.HasPrefix(got.Token, "spark-rest-") || len(got.Token) > api.MaxTokenLen {
		t.Fatalf("submitted\n%+v\nwant\n%+v", got, want)
	}

	// Spark's create is not idempotent: the same body twice is two
	// drivers, with two tokens.
	b := do(t, h, http.MethodPost, "/v1/submissions/create", sparkSubmitJSON)
	if b.str("submissionId") != "driver-20260101000000-0001" || f.submitted[1].Token == got.Token {
		t.Fatalf("second create: %s, tokens %q %q", b.raw, got.Token, f.submitted[1].Token)
	}
}

// sameSubmit compares every field of two submissions; the restart bounds
// too, since spark.driver.supervise must stay unbounded as in Spark.
func sameSubmit(a, b api.SubmitRequest) bool {
	return a.Token == b.Token && a.Name == b.Name && slices.Equal(a.Argv, b.Argv) && maps.Equal(a.Env, b.Env) &&
		a.Cores == b.Cores && a.MemoryMB == b.MemoryMB && a.Supervise == b.Supervise && slices.Equal(a.Artifacts, b.Artifacts) &&
		maps.Equal(a.Resources, b.Resources) && a.User == b.User &&
		a.MaxRestarts == b.MaxRestarts && a.RestartWindowMS == b.RestartWindowMS && a.RescheduleAfter == b.RescheduleAfter
}

// spark.drover.user names the user the driver runs as, as it is: Drover's
// API checks it. SPARK_USER, the submitting shell's user that Spark's
// client passes on, names none: a submission asks for a user only on
// purpose.
func TestCreateNamesTheUser(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	body := strings.Replace(sparkSubmitJSON, `"sparkProperties" : {`, `"sparkProperties" : {
    "`+UserProperty+`" : "etl",`, 1)
	for _, b := range []string{body, sparkSubmitJSON} {
		if a := do(t, h, http.MethodPost, "/v1/submissions/create", b); a.status != http.StatusOK {
			t.Fatalf("create: %d %s", a.status, a.raw)
		}
	}
	if f.submitted[0].User != "etl" || f.submitted[1].User != "" || f.submitted[1].Env["SPARK_USER"] != "etl" {
		t.Fatalf("users %q and %q, want etl and none", f.submitted[0].User, f.submitted[1].User)
	}
}

// spark.drover.namespace and spark.drover.priority set the driver's
// namespace and priority, at their bounds (a name of
// model.MaxNamespaceLen bytes, priorities 0 and model.MaxPriority); a
// submission without them names neither (TestCreateRefusals has them
// just past).
func TestCreateNamesNamespaceAndPriority(t *testing.T) {
	long := strings.Repeat("n", model.MaxNamespaceLen)
	for _, tc := range []struct {
		namespace, priority string
		want                int
	}{{"etl", "0", 0}, {long, strconv.Itoa(model.MaxPriority), model.MaxPriority}} {
		f := newFake()
		body := strings.Replace(sparkSubmitJSON, `"sparkProperties" : {`, `"sparkProperties" : {
    "`+NamespaceProperty+`" : "`+tc.namespace+`", "`+PriorityProperty+`" : "`+tc.priority+`",`, 1)
		if a := do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", body); a.status != http.StatusOK {
			t.Fatalf("create: %d %s", a.status, a.raw)
		}
		if got := f.submitted[0]; got.Namespace != tc.namespace || got.Priority == nil || *got.Priority != tc.want {
			t.Fatalf("namespace %q priority %v, want %q and %d", got.Namespace, got.Priority, tc.namespace, tc.want)
		}
	}
	f := newFake()
	if a := do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", sparkSubmitJSON); a.status != http.StatusOK {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	if got := f.submitted[0]; got.Namespace != "" || got.Priority != nil {
		t.Fatalf("a submission without the properties names namespace %q priority %v", got.Namespace, got.Priority)
	}
}

// The driver's AppCores, what its app will ask for, come from
// spark.cores.max, else spark.executor.instances times
// spark.executor.cores, the smaller where all three are given, at
// model.MaxAppCores too (TestCreateRefusals has them just past); a
// submission that names neither asks for none known.
func TestCreateTakesTheAppsCores(t *testing.T) {
	maxApp := strconv.Itoa(model.MaxAppCores)
	for _, tc := range []struct {
		props map[string]string
		want  int
	}{
		{nil, 0},
		{map[string]string{"spark.cores.max": "8"}, 8},
		{map[string]string{"spark.cores.max": maxApp}, model.MaxAppCores},
		{map[string]string{"spark.executor.instances": "3", "spark.executor.cores": "2"}, 6},
		{map[string]string{"spark.executor.instances": "1024", "spark.executor.cores": "1024"}, model.MaxAppCores},
		{map[string]string{"spark.cores.max": "4", "spark.executor.instances": "3", "spark.executor.cores": "2"}, 4},
		{map[string]string{"spark.cores.max": "10", "spark.executor.instances": "3", "spark.executor.cores": "2"}, 6},
		{map[string]string{"spark.executor.cores": "2"}, 0},
		{map[string]string{"spark.executor.instances": "3"}, 0},
	} {
		f := newFake()
		extra := ""
		for k, v := range tc.props {
			extra += fmt.Sprintf("%q : %q,\n", k, v)
		}
		body := strings.Replace(sparkSubmitJSON, `"sparkProperties" : {`, `"sparkProperties" : {`+extra, 1)
		if a := do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", body); a.status != http.StatusOK {
			t.Fatalf("create with %v: %d %s", tc.props, a.status, a.raw)
		}
		if got := f.submitted[0].AppCores; got != tc.want {
			t.Errorf("properties %v: app cores %d, want %d", tc.props, got, tc.want)
		}
	}
}

// spark.driver.resource.{name}.amount asks for custom resources, an amount
// of 0 for none, as in Spark; discoveryScript and vendor are passed on.
func TestCreateAsksForDriverResources(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	body := strings.Replace(minimalJSON, `"sparkProperties" : { `, `"sparkProperties" : {
    "spark.driver.resource.gpu.amount" : "2", "spark.driver.resource.gpu.discoveryScript" : "/opt/gpus.sh",
    "spark.driver.resource.fpga.amount" : "0", "spark.driver.resource.fpga.vendor" : "xilinx.com",`, 1)
	if a := do(t, h, http.MethodPost, "/v1/submissions/create", body); a.status != http.StatusOK {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	if got := f.submitted[0].Resources; !maps.Equal(got, model.ResourceAmounts{"gpu": 2}) {
		t.Fatalf("resources %v, want gpu=2 only", got)
	}
}

// The appResource and the spark.jars and spark.files entries that are
// http(s):// or file: URLs are staged, and the driver is given their staged
// paths; the others pass as they are.
func TestCreateStagesURLResources(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f, DefaultLauncher...)
	body := `{"action":"CreateSubmissionRequest","clientSparkVersion":"3.5.1","appResource":"https://repo.example/app.jar",
		"mainClass":"M","appArgs":[],"environmentVariables":{},
		"sparkProperties":{"spark.app.name":"j","spark.jars":"https://repo.example/app.jar, hdfs://nn/dep.jar,https://repo.example/lib/dep.jar?checksum=sha256:` + strings.Repeat("0", 64) + `",
		"spark.files":"file:/etc/job.conf,https://repo.example/data.tar.gz#data","spark.archives":"https://repo.example/env.zip"}}`
	if a := do(t, h, http.MethodPost, "/v1/submissions/create", body); a.fields["success"] != true {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	got := f.submitted[0]
	wantArtifacts := []model.Artifact{
		{Source: "https://repo.example/app.jar?archive=false"},
		{Source: "https://repo.example/lib/dep.jar?checksum=sha256:" + strings.Repeat("0", 64) + "&archive=false", Dest: "jars"},
		{Source: "file:/etc/job.conf?archive=false", Dest: "files"},
		{Source: "https://repo.example/data.tar.gz?archive=false#data", Dest: "files"},
	}
	if !slices.Equal(got.Artifacts, wantArtifacts) {
		t.Fatalf("artifacts\n%+v\nwant\n%+v", got.Artifacts, wantArtifacts)
	}
	for _, want := range []string{"spark.jars=./app.jar,hdfs://nn/dep.jar,./jars/dep.jar", "spark.files=./files/job.conf,./files/data.tar.gz",
		"spark.archives=https://repo.example/env.zip"} {
		if !slices.Contains(got.Argv, want) {
			t.Errorf("argv %q lacks --conf %s", got.Argv, want)
		}
	}
	if got.Argv[len(got.Argv)-1] != "./app.jar" {
		t.Errorf("argv %q does not end with the staged appResource", got.Argv)
	}
	if _, err := model.NormalizeArtifacts(got.Artifacts); err != nil {
		t.Errorf("the master would refuse them: %v", err)
	}
	bad := strings.Replace(body, `"appResource":"https://repo.example/app.jar"`, `"appResource":"https://repo.example/"`, 1)
	if a := do(t, h, http.MethodPost, "/v1/submissions/create", bad); a.fields["success"] == true || !strings.Contains(a.str("message"), "appResource") {
		t.Fatalf("an appResource URL without a file name: %d %s", a.status, a.raw)
	}
}

func TestCreateDefaultsAndFilteredEnvironment(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	if a := do(t, h, http.MethodPost, "/v1/submissions/create", minimalJSON); a.fields["success"] != true {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	got := f.submitted[0]
	// Spark's defaults: 1 core, 1024 MiB and 384 of overhead, not supervised; no appArgs; and
	// SPARK_ENV_LOADED and SPARK_HOME dropped, leaving no environment.
	// The file: jar is staged into the driver's directory.
	want := api.SubmitRequest{Token: got.Token, Name: "pi", DriverSpec: model.DriverSpec{Argv: []string{"/opt/spark/bin/spark-submit", "--class", "Pi", "./pi.jar"}, Cores: DefaultDriverCores, MemoryMB: DefaultDriverMemoryMB + DefaultMinOverheadMB, Artifacts: []model.Artifact{{Source: "file:/jobs/pi.jar?archive=false"}}}}
	if !sameSubmit(got, want) || got.Env != nil {
		t.Fatalf("submitted %+v, want %+v", got, want)
	}
}

func TestDefaultLauncherExpansion(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f, DefaultLauncher...)
	do(t, h, http.MethodPost, "/v1/submissions/create", sparkSubmitJSON)
	want := []string{"spark-submit", "--deploy-mode", "client", "--master", "local[2]", "--class", "com.example.WordCount", "--driver-memory", "2048m",
		"--conf", "spark.app.name=wordcount", "--conf", "spark.app.submitTime=1767225600000",
		"--conf", "spark.driver.cores=2", "--conf", "spark.driver.memory=2g", "--conf", "spark.driver.supervise=true",
		"--conf", "spark.jars=hdfs://nn/jobs/wordcount.jar", "--conf", "spark.submit.pyFiles=",
		"hdfs://nn/jobs/wordcount.jar", "hdfs://nn/in", "hdfs://nn/out"}
	if got := f.submitted[0].Argv; !slices.Equal(got, want) {
		t.Fatalf("argv\n%q\nwant\n%q", got, want)
	}
}

// A driver's memory, which it is placed by and held to, is its heap
// (spark.driver.memory, what --driver-memory gets) plus the overhead Spark
// adds on YARN and Kubernetes: spark.driver.memoryOverhead when given
// (MiB for a bare number), else the larger of
// spark.driver.memoryOverheadFactor (0.10) of the heap and
// spark.driver.minMemoryOverhead (384m).
func TestCreateAddsTheMemoryOverhead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		props      string
		heap, want int64
	}{
		{"default 384 MiB least", `"spark.driver.memory" : "2g"`, 2048, 2048 + 384},
		{"default 10 %", `"spark.driver.memory" : "8g"`, 8192, 8192 + 819},
		{"overhead given", `"spark.driver.memory" : "2g", "spark.driver.memoryOverhead" : "1g"`, 2048, 2048 + 1024},
		{"overhead as bare MiB", `"spark.driver.memory" : "2g", "spark.driver.memoryOverhead" : "100"`, 2048, 2048 + 100},
		{"overhead 0", `"spark.driver.memory" : "2g", "spark.driver.memoryOverhead" : "0"`, 2048, 2048},
		{"overhead wins over factor", `"spark.driver.memory" : "2g", "spark.driver.memoryOverhead" : "1m", "spark.driver.memoryOverheadFactor" : "0.5"`, 2048, 2048 + 1},
		{"factor", `"spark.driver.memory" : "10g", "spark.driver.memoryOverheadFactor" : "0.25"`, 10240, 10240 + 2560},
		{"factor under the least", `"spark.driver.memory" : "1g", "spark.driver.memoryOverheadFactor" : "0.25"`, 1024, 1024 + 384},
		{"factor above 1, as Spark allows", `"spark.driver.memory" : "1g", "spark.driver.memoryOverheadFactor" : "1.5"`, 1024, 1024 + 1536},
		{"least lowered", `"spark.driver.memory" : "1g", "spark.driver.minMemoryOverhead" : "0"`, 1024, 1024 + 102},
		{"least raised", `"spark.driver.memory" : "1g", "spark.driver.minMemoryOverhead" : "1g"`, 1024, 1024 + 1024},
		{"least in bytes", `"spark.driver.memory" : "1g", "spark.driver.minMemoryOverhead" : "2097152b"`, 1024, 1024 + 102},
		{"default heap", `"spark.driver.cores" : "1"`, DefaultDriverMemoryMB, DefaultDriverMemoryMB + DefaultMinOverheadMB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			h := newTestHandler(t, f, DefaultLauncher...)
			body := strings.Replace(minimalJSON, `"spark.app.name" : "pi"`, `"spark.app.name" : "pi", `+tc.props, 1)
			if a := do(t, h, http.MethodPost, "/v1/submissions/create", body); a.fields["success"] != true {
				t.Fatalf("create: %d %s", a.status, a.raw)
			}
			got := f.submitted[0]
			i := slices.Index(got.Argv, "--driver-memory")
			if got.MemoryMB != tc.want || i < 0 || got.Argv[i+1] != fmt.Sprintf("%dm", tc.heap) {
				t.Fatalf("memory_mb %d, argv %q; want %d and --driver-memory %dm, the heap alone", got.MemoryMB, got.Argv, tc.want, tc.heap)
			}
		})
	}
}

func TestUnknownFieldsAreReported(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	body := strings.Replace(minimalJSON, `"mainClass"`, `"tomato" : "not-a-fruit", "potato" : 3, "mainClass"`, 1)
	a := do(t, h, http.MethodPost, "/v1/submissions/create", body)
	uf, _ := a.fields["unknownFields"].([]any)
	if a.status != http.StatusOK || a.fields["success"] != true || len(uf) != 2 || uf[0] != "potato" || uf[1] != "tomato" {
		t.Fatalf("got %d %s; want success with unknownFields [potato tomato]", a.status, a.raw)
	}
}

// TestCreateRefusals: malformed or invalid create requests get a 400
// ErrorResponse, as Spark's SubmitRequestServlet answers them, and never
// reach the backend.
func TestCreateRefusals(t *testing.T) {
	set := func(old, new string) string {
		if !strings.Contains(sparkSubmitJSON, old) {
			t.Fatalf("%q not in the request", old)
		}
		return strings.Replace(sparkSubmitJSON, old, new, 1)
	}
	prop := func(k, v string) string {
		return set(`"spark.jars"`, fmt.Sprintf("%q : %q,\n    \"spark.jars\"", k, v))
	}
	cases := []struct{ name, body string }{
		{"empty body", ""},
		{"malformed JSON", sparkSubmitJSON[:len(sparkSubmitJSON)/2]},
		{"not an object", `"hello, world"`},
		{"null", `null`},
		{"array", `[]`},
		{"trailing data", sparkSubmitJSON + ` {}`},
		{"missing action", set(`"action" : "CreateSubmissionRequest",`, ``)},
		{"null action", set(`"action" : "CreateSubmissionRequest"`, `"action" : null`)},
		{"action not a string", set(`"action" : "CreateSubmissionRequest"`, `"action" : 7`)},
		{"misspelt field", strings.ReplaceAll(sparkSubmitJSON, `"action"`, `"fraction"`)},
		{"unknown action", set(`"CreateSubmissionRequest"`, `"LaunchRocketRequest"`)},
		{"a response, not a request", set(`"CreateSubmissionRequest"`, `"KillSubmissionResponse"`)},
		{"missing appResource", set(`"appResource" : "hdfs://nn/jobs/wordcount.jar",`, ``)},
		{"null appResource", set(`"appResource" : "hdfs://nn/jobs/wordcount.jar"`, `"appResource" : null`)},
		{"missing mainClass", set(`"mainClass" : "com.example.WordCount",`, ``)},
		{"missing clientSparkVersion", set(`"clientSparkVersion" : "3.5.1",`, ``)},
		{"missing sparkProperties", strings.Split(sparkSubmitJSON, `,
  "sparkProperties"`)[0] + "}"},
		{"missing spark.app.name", set(`"spark.app.name" : "wordcount",`, ``)},
		{"supervise not boolean", set(`"spark.driver.supervise" : "true"`, `"spark.driver.supervise" : "nope, never"`)},
		{"cores not numeric", set(`"spark.driver.cores" : "2"`, `"spark.driver.cores" : "one hundred feet"`)},
		{"cores fractional", set(`"spark.driver.cores" : "2"`, `"spark.driver.cores" : "1.5"`)},
		{"cores zero", set(`"spark.driver.cores" : "2"`, `"spark.driver.cores" : "0"`)},
		{"cores past the bound", set(`"spark.driver.cores" : "2"`, `"spark.driver.cores" : "65537"`)},
		{"memory not a size", set(`"spark.driver.memory" : "2g"`, `"spark.driver.memory" : "lots"`)},
		{"memory fractional", set(`"spark.driver.memory" : "2g"`, `"spark.driver.memory" : "1.5g"`)},
		{"memory in bytes under 1 MiB", set(`"spark.driver.memory" : "2g"`, `"spark.driver.memory" : "4096"`)},
		{"cores.max not numeric", prop("spark.cores.max", "two men")},
		{"cores.max fractional", prop("spark.cores.max", "2.5")},
		{"cores.max negative", prop("spark.cores.max", "-1")},
		{"cores.max past the bound", prop("spark.cores.max", strconv.Itoa(model.MaxAppCores+1))},
		{"executor instances not numeric", prop("spark.executor.instances", "a few")},
		{"executor instances negative", prop("spark.executor.instances", "-1")},
		{"executor instances past the bound", prop("spark.executor.instances", strconv.Itoa(model.MaxAppCores+1))},
		{"executor cores zero", prop("spark.executor.cores", "0")},
		{"executor cores fractional", prop("spark.executor.cores", "1.5")},
		{"executor instances times cores past the bound", strings.Replace(prop("spark.executor.instances", "1025"), `"spark.jars"`, `"spark.executor.cores" : "1024", "spark.jars"`, 1)},
		{"executor memory not a size", prop("spark.executor.memory", "plenty")},
		{"appArgs not a list", set(`[ "hdfs://nn/in", "hdfs://nn/out" ]`, `"hdfs://nn/in"`)},
		{"null appArg", set(`[ "hdfs://nn/in", "hdfs://nn/out" ]`, `[ null ]`)},
		{"property not a string", set(`"spark.driver.cores" : "2"`, `"spark.driver.cores" : 2`)},
		{"null property", set(`"spark.driver.cores" : "2"`, `"spark.driver.cores" : null`)},
		{"environment not an object", set(`"environmentVariables" : {`, `"environmentVariables" : 1, "x" : {`)},
		{"resource amount fractional", prop("spark.driver.resource.gpu.amount", "0.5")},
		{"resource amount negative", prop("spark.driver.resource.gpu.amount", "-1")},
		{"resource amount not numeric", prop("spark.driver.resource.gpu.amount", "two")},
		{"resource name Drover cannot offer", prop("spark.driver.resource.GPU.amount", "1")},
		{"resource property without a field", prop("spark.driver.resource.gpu", "1")},
		{"overhead negative", prop("spark.driver.memoryOverhead", "-1g")},
		{"overhead not a size", prop("spark.driver.memoryOverhead", "some")},
		{"overhead fractional", prop("spark.driver.memoryOverhead", "0.5g")},
		{"overhead factor not a number", prop("spark.driver.memoryOverheadFactor", "a tenth")},
		{"overhead factor zero", prop("spark.driver.memoryOverheadFactor", "0")},
		{"overhead factor negative", prop("spark.driver.memoryOverheadFactor", "-0.1")},
		{"overhead factor NaN", prop("spark.driver.memoryOverheadFactor", "NaN")},
		{"overhead factor infinite", prop("spark.driver.memoryOverheadFactor", "Inf")},
		{"overhead factor past the memory bound", prop("spark.driver.memoryOverheadFactor", "1e9")},
		{"least overhead negative", prop("spark.driver.minMemoryOverhead", "-384m")},
		{"least overhead not a size", prop("spark.driver.minMemoryOverhead", "a bit")},
		{"memory and overhead past the bound", prop("spark.driver.memoryOverhead", "2147483647m")},
		{"namespace empty", prop(NamespaceProperty, "")},
		{"namespace not a DNS label", prop(NamespaceProperty, "Etl_Team")},
		{"namespace past the bound", prop(NamespaceProperty, strings.Repeat("n", model.MaxNamespaceLen+1))},
		{"priority not numeric", prop(PriorityProperty, "high")},
		{"priority fractional", prop(PriorityProperty, "50.5")},
		{"priority negative", prop(PriorityProperty, "-1")},
		{"priority past the bound", prop(PriorityProperty, "101")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			a := do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", c.body)
			a.isError(t, http.StatusBadRequest)
			if n := f.callCount(); n != 0 {
				t.Fatalf("the backend was called %d times", n)
			}
		})
	}
}

// spark.driver.cores at model.MaxCores passes; one more is a refusal
// (TestCreateRefusals).
func TestCreateTakesCoresAtTheBound(t *testing.T) {
	f := newFake()
	body := strings.Replace(sparkSubmitJSON, `"spark.driver.cores" : "2"`, `"spark.driver.cores" : "65536"`, 1)
	if a := do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", body); a.status != http.StatusOK || f.submitted[0].Cores != model.MaxCores {
		t.Fatalf("create with 65536 cores: %d %s", a.status, a.raw)
	}
}

func TestCreateBodyLimit(t *testing.T) {
	f := newFake()
	body := strings.Replace(minimalJSON, `"Pi"`, `"`+strings.Repeat("P", api.MaxBodyBytes)+`"`, 1)
	do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", body).isError(t, http.StatusRequestEntityTooLarge)
	if f.callCount() != 0 {
		t.Fatal("an oversized request reached the backend")
	}
}

// TestNoLeaderLetsSparkTryTheNextMaster: a master that reaches no leader
// answers success=false, on which Spark's client moves on to the next
// master of its URL (kill answers need the standby prefix for that).
func TestNoLeaderLetsSparkTryTheNextMaster(t *testing.T) {
	f := newFake()
	down := api.Errorf(api.ErrUnavailable, "master m2 knows no leader")
	f.submitErr, f.killErr, f.driverErr, f.allErr = down, down, down, down
	h := newTestHandler(t, f)
	for _, c := range []struct{ method, path, body, action string }{
		{http.MethodPost, "/v1/submissions/create", minimalJSON, ActionCreateSubmissionResponse},
		{http.MethodPost, "/v1/submissions/kill/driver-20260101000000-0000", "", ActionKillSubmissionResponse},
		{http.MethodGet, "/v1/submissions/status/driver-20260101000000-0000", "", ActionSubmissionStatusResponse},
		{http.MethodPost, "/v1/submissions/killall", "", ActionKillAllSubmissionResponse},
		{http.MethodPost, "/v1/submissions/clear", "", ActionClearResponse},
	} {
		a := do(t, h, c.method, c.path, c.body)
		if a.status != http.StatusOK || a.str("action") != c.action || a.fields["success"] != false ||
			!strings.HasPrefix(a.str("message"), backupPrefix) {
			t.Fatalf("%s %s: %d %s", c.method, c.path, a.status, a.raw)
		}
	}
}

func TestStatus(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	exit := 3
	f.drivers["driver-20260101000000-0007"] = &model.Driver{ID: "driver-20260101000000-0007", State: model.DriverRunning, WorkerID: "w1", Attempt: 1,
		Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning}}}
	f.drivers["driver-20260101000000-0008"] = &model.Driver{ID: "driver-20260101000000-0008", State: model.DriverFailed, Attempt: 1, ExitCode: &exit,
		Message: "exited with code 3", Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverFailed, ExitCode: &exit}}}
	f.drivers["driver-20260101000000-0009"] = &model.Driver{ID: "driver-20260101000000-0009", State: model.DriverSubmitted, Attempt: 1,
		Message: "waiting for a worker", Attempts: []model.Attempt{}}

	a := do(t, h, http.MethodGet, "/v1/submissions/status/driver-20260101000000-0007", "")
	want := map[string]any{"action": ActionSubmissionStatusResponse, "driverState": "RUNNING", "serverSparkVersion": ServerSparkVersion,
		"submissionId": "driver-20260101000000-0007", "success": true, "workerHostPort": "10.0.0.11:7402", "workerId": "w1"}
	if a.status != http.StatusOK || !maps.Equal(a.fields, want) {
		t.Fatalf("running: %d %s", a.status, a.raw)
	}
	// An ended driver names the worker it ran on, and why it failed.
	b := do(t, h, http.MethodGet, "/v1/submissions/status/driver-20260101000000-0008/and/more", "")
	if b.str("driverState") != "FAILED" || b.str("workerId") != "w1" || b.str("message") != "exited with code 3" ||
		b.str("submissionId") != "driver-20260101000000-0008" {
		t.Fatalf("failed: %s", b.raw)
	}
	// A waiting driver: no worker, and no message (Spark's client would
	// log it as an error).
	c := do(t, h, http.MethodGet, "/v1/submissions/status/driver-20260101000000-0009", "")
	if c.str("driverState") != "SUBMITTED" || !slices.Equal(c.keys(), []string{"action", "driverState", "serverSparkVersion", "submissionId", "success"}) {
		t.Fatalf("waiting: %s", c.raw)
	}
	// A driver that no ALIVE worker could ever hold says so: it would
	// wait for ever in silence, and Spark's client logs the message.
	unplaceable := "waiting: " + api.ReasonUnplaceable + " (asks 100 cores, 1024 MiB; the largest worker offers 4 cores, 4096 MiB)"
	f.drivers["driver-20260101000000-0010"] = &model.Driver{ID: "driver-20260101000000-0010", State: model.DriverSubmitted, Attempt: 1,
		Message: unplaceable, Attempts: []model.Attempt{}}
	if e := do(t, h, http.MethodGet, "/v1/submissions/status/driver-20260101000000-0010", ""); e.str("driverState") != "SUBMITTED" || e.str("message") != unplaceable {
		t.Fatalf("unplaceable: %s", e.raw)
	}
	// An unknown ID is success=false with 200, as in Spark.
	d := do(t, h, http.MethodGet, "/v1/submissions/status/does-not-exist", "")
	if d.status != http.StatusOK || d.fields["success"] != false || d.str("submissionId") != "does-not-exist" || d.str("driverState") != "" {
		t.Fatalf("unknown: %d %s", d.status, d.raw)
	}
}

func TestKill(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	f.drivers["driver-20260101000000-0001"] = &model.Driver{ID: "driver-20260101000000-0001", State: model.DriverRunning}
	f.drivers["driver-20260101000000-0002"] = &model.Driver{ID: "driver-20260101000000-0002", State: model.DriverFinished}
	for _, c := range []struct {
		id, want string
		success  bool
	}{
		{"driver-20260101000000-0001", "", true},
		{"driver-20260101000000-0001", "", true}, // a second kill is no error
		{"driver-20260101000000-0002", "Driver driver-20260101000000-0002 has already ended (FINISHED).", false},
		{"does-not-exist", "No such submission", false},
	} {
		a := do(t, h, http.MethodPost, "/v1/submissions/kill/"+c.id, "")
		if a.status != http.StatusOK || a.str("action") != ActionKillSubmissionResponse || a.fields["success"] != c.success ||
			a.str("submissionId") != c.id || !strings.Contains(a.str("message"), c.want) {
			t.Fatalf("kill %s: %d %s", c.id, a.status, a.raw)
		}
	}
	if f.drivers["driver-20260101000000-0001"].State != model.DriverKilled {
		t.Fatal("the driver was not killed")
	}
	// The refusal of an ended driver is said once, whatever the words
	// the service chose.
	a := do(t, h, http.MethodPost, "/v1/submissions/kill/driver-20260101000000-0002", "")
	if strings.Count(strings.ToLower(a.str("message")), "ended") != 1 {
		t.Fatalf("kill of an ended driver: %q, want one sentence", a.str("message"))
	}
}

// TestKillAllAndClear: Spark 4's killall kills every driver that has not
// ended and clear drops the finished ones, each answered in the shape of
// its Spark response; a body, which Spark's client never sends, is refused
// before anything is killed.
func TestKillAllAndClear(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	for id, st := range map[string]model.DriverState{
		"driver-20260101000000-0001": model.DriverRunning, "driver-20260101000000-0002": model.DriverSubmitted,
		"driver-20260101000000-0003": model.DriverFinished,
	} {
		f.drivers[id] = &model.Driver{ID: id, State: st}
	}
	for _, action := range []string{"killall", "clear"} {
		a := do(t, h, http.MethodPost, "/v1/submissions/"+action, `{"submissionId":"driver-20260101000000-0001"}`)
		a.isError(t, http.StatusBadRequest)
	}
	if f.callCount() != 0 || f.drivers["driver-20260101000000-0001"].State != model.DriverRunning {
		t.Fatal("a request with a body reached the backend")
	}

	want := []string{"action", "message", "serverSparkVersion", "success"}
	a := do(t, h, http.MethodPost, "/v1/submissions/killall", "")
	if a.status != http.StatusOK || a.str("action") != ActionKillAllSubmissionResponse || a.fields["success"] != true ||
		!slices.Equal(a.keys(), want) || a.str("message") != "Killed 2 drivers that had not ended." {
		t.Fatalf("killall: %d %s", a.status, a.raw)
	}
	for id, d := range f.drivers {
		if !d.State.Terminal() {
			t.Fatalf("%s is %s after killall", id, d.State)
		}
	}
	c := do(t, h, http.MethodPost, "/v1/submissions/clear/", "")
	if c.status != http.StatusOK || c.str("action") != ActionClearResponse || c.fields["success"] != true ||
		!slices.Equal(c.keys(), want) || c.str("message") != "Cleared 3 finished drivers and 0 finished applications." || len(f.drivers) != 0 {
		t.Fatalf("clear: %d %s, %d drivers left", c.status, c.raw, len(f.drivers))
	}

	// A refusal of access is Spark's ErrorResponse with its status.
	f.deny = api.Errorf(api.ErrForbidden, "clear needs operator access")
	for _, action := range []string{"killall", "clear"} {
		do(t, h, http.MethodPost, "/v1/submissions/"+action, "").isError(t, http.StatusForbidden)
	}
}

// TestReadyz: ready while the master knows a ready leader, whoever it is;
// otherwise 503 with Spark's ErrorResponse and the reason. It needs no
// credential, even where a wrong one is refused elsewhere.
func TestReadyz(t *testing.T) {
	f := newFake()
	f.leader = api.Check{Name: api.CheckLeader, OK: true, Message: "leader m1"}
	l, err := NewLauncher(DefaultLauncher)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(f, fakeGuard{caller: auth.ErrBadToken}, l)
	a := do(t, h, http.MethodGet, "/v1/submissions/readyz", "")
	if a.status != http.StatusOK || a.str("action") != ActionReadyzResponse || a.fields["success"] != true ||
		a.str("message") != "Master m2 is ready: leader m1." {
		t.Fatalf("ready: %d %s", a.status, a.raw)
	}
	f.leader = api.Check{Name: api.CheckLeader, Message: "no leader known"}
	b := do(t, h, http.MethodGet, "/v1/submissions/readyz", "")
	b.isError(t, http.StatusServiceUnavailable)
	if b.str("message") != "Master m2 is not ready: no leader known." {
		t.Fatalf("not ready: %s", b.raw)
	}
}

// TestBadPaths follows Spark's ErrorServlet and servlets: 400 for a path
// naming no action or a status or kill with no ID, 468 with
// highestProtocolVersion for another protocol version, 405 for another
// method.
func TestBadPaths(t *testing.T) {
	f := newFake()
	h := newTestHandler(t, f)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/", http.StatusBadRequest},
		{http.MethodGet, "/v1", http.StatusBadRequest},
		{http.MethodGet, "/v1/", http.StatusBadRequest},
		{http.MethodGet, "/v1/submissions", http.StatusBadRequest},
		{http.MethodGet, "/v1/submissions/", http.StatusBadRequest},
		{http.MethodGet, "/v1/submissions/bad", http.StatusBadRequest},
		{http.MethodPost, "/v1/submissions/killeverything", http.StatusBadRequest},
		{http.MethodGet, "/v1/submissions/killall", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/submissions/clear", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/submissions/readyz", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/drivers", http.StatusBadRequest},
		{http.MethodPost, "/v1/submissions/kill", http.StatusBadRequest},
		{http.MethodPost, "/v1/submissions/kill/", http.StatusBadRequest},
		{http.MethodGet, "/v1/submissions/status", http.StatusBadRequest},
		{http.MethodGet, "/v1/submissions/status/", http.StatusBadRequest},
		{http.MethodGet, "/bad-version", StatusUnknownProtocolVersion},
		{http.MethodPost, "/v2/submissions/create", StatusUnknownProtocolVersion},
		{http.MethodGet, "/v2/submissions/status/driver-20260101000000-0000", StatusUnknownProtocolVersion},
		{http.MethodGet, "/v1/submissions/create", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/submissions/kill/x", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/submissions/status/x", http.StatusMethodNotAllowed},
	} {
		a := do(t, h, c.method, c.path, "")
		a.isError(t, c.status)
	}
	if f.callCount() != 0 {
		t.Fatal("a bad path reached the backend")
	}
}

// TestRefusedAccess: the service's refusal of access is answered in
// Spark's shape with its status and challenge, and nothing is submitted.
// A credential that proves nothing (a wrong token) is refused before a
// byte of the body is read.
func TestRefusedAccess(t *testing.T) {
	f := newFake()
	f.deny = api.Errorf(api.ErrUnauthenticated, "submit access needs a token")
	h := newTestHandler(t, f)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sparkRequest(http.MethodPost, "/v1/submissions/create", strings.NewReader(sparkSubmitJSON)))
	var e ErrorResponse
	if rec.Code != http.StatusUnauthorized || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Action != ActionErrorResponse ||
		rec.Header().Get("WWW-Authenticate") == "" || rec.Header().Get("Connection") != "close" {
		t.Fatalf("got %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if len(f.submitted) != 0 || f.callCount() != 0 {
		t.Fatalf("%d submissions and %d calls past the refusal", len(f.submitted), f.callCount())
	}
	for _, p := range []string{"/v1/submissions/status/x", "/v1/submissions/kill/x"} {
		m := http.MethodGet
		if strings.Contains(p, "kill") {
			m = http.MethodPost
		}
		do(t, h, m, p, "").isError(t, http.StatusUnauthorized)
	}

	badToken := fakeGuard{caller: auth.ErrBadToken}
	l, err := NewLauncher(DefaultLauncher)
	if err != nil {
		t.Fatal(err)
	}
	body := &countingReader{r: strings.NewReader(sparkSubmitJSON)}
	rec = httptest.NewRecorder()
	NewHandler(newFake(), badToken, l).ServeHTTP(rec, sparkRequest(http.MethodPost, "/v1/submissions/create", body))
	if rec.Code != http.StatusForbidden || body.n != 0 {
		t.Fatalf("a wrong token: %d after reading %d bytes, want 403 before the body", rec.Code, body.n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// endless is a body that never ends: '{' for ever.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '{'
	}
	return len(p), nil
}

// TestWriteWithoutCredentialRefusedBeforeBody: on masters with tokens, a
// create, kill, killall or clear that brings no credential at all is 401
// with the challenge, in Spark's shape, before a byte of its body is read:
// a body that never ends is answered at once. A status read without one
// goes on to the service, which decides on reads (--open-reads).
func TestWriteWithoutCredentialRefusedBeforeBody(t *testing.T) {
	g, err := auth.New(auth.Config{OperatorToken: "OperatorTok-0123456789abcdef", SubmitToken: "SubmitTok-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLauncher(DefaultLauncher)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	h := NewHandler(f, g, l)
	for _, p := range []string{"/v1/submissions/create", "/v1/submissions/kill/driver-20260101000000-0000",
		"/v1/submissions/killall", "/v1/submissions/clear"} {
		body := &countingReader{r: endless{}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, sparkRequest(http.MethodPost, p, body))
		var e ErrorResponse
		if rec.Code != http.StatusUnauthorized || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Action != ActionErrorResponse ||
			!strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") || body.n != 0 {
			t.Fatalf("%s without a credential: %d %s after reading %d bytes, want 401 with a challenge before the body",
				p, rec.Code, rec.Body, body.n)
		}
	}
	do(t, h, http.MethodGet, "/v1/submissions/status/driver-20260101000000-0000", "")
	if f.callCount() != 1 {
		t.Fatalf("the backend was called %d times, want once (the status read)", f.callCount())
	}
}

// TestCreateNeedsJSONContentType: a create whose Content-Type is not
// application/json (parameters allowed, case ignored) is 415 before its
// body is read: text/plain, a form and multipart are what a page of
// another site can make a browser post without asking first.
func TestCreateNeedsJSONContentType(t *testing.T) {
	for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonx", "application/json-seq", "not a type"} {
		f := newFake()
		body := &countingReader{r: strings.NewReader(sparkSubmitJSON)}
		req := httptest.NewRequest(http.MethodPost, "/v1/submissions/create", body)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		newTestHandler(t, f).ServeHTTP(rec, req)
		var e ErrorResponse
		if rec.Code != http.StatusUnsupportedMediaType || json.Unmarshal(rec.Body.Bytes(), &e) != nil ||
			!strings.Contains(e.Message, "Content-Type: application/json") || body.n != 0 || f.callCount() != 0 {
			t.Fatalf("Content-Type %q: %d %s after reading %d bytes, want 415 before the body", ct, rec.Code, rec.Body, body.n)
		}
	}
	for _, ct := range []string{"application/json", "application/json;charset=UTF-8", "Application/JSON; charset=utf-8"} {
		f := newFake()
		req := httptest.NewRequest(http.MethodPost, "/v1/submissions/create", strings.NewReader(sparkSubmitJSON))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		newTestHandler(t, f).ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || len(f.submitted) != 1 {
			t.Fatalf("Content-Type %q: %d %s", ct, rec.Code, rec.Body)
		}
	}
}

// TestBackendRefusalsPassThrough: the service's other refusals keep their
// status, message and Retry-After.
func TestBackendRefusalsPassThrough(t *testing.T) {
	for _, se := range []struct {
		err        error
		status     int
		retryAfter string
	}{
		{fmt.Errorf("%w: environment name \"A-B\" is not [A-Za-z_][A-Za-z0-9_]*", model.ErrInvalidCommand), http.StatusBadRequest, ""},
		{api.Errorf(api.ErrTooManyRequests, "too many submissions in flight"), http.StatusTooManyRequests, "1"},
		{api.Errorf(api.ErrForbidden, "submit access denied"), http.StatusForbidden, ""},
	} {
		f := newFake()
		f.submitErr = se.err
		a := do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", minimalJSON)
		a.isError(t, se.status)
		if a.str("message") != se.err.Error() || a.header.Get("Retry-After") != se.retryAfter {
			t.Fatalf("got %v %s", a.header, a.raw)
		}
	}
	f := newFake()
	f.submitErr = errors.New("boom")
	do(t, newTestHandler(t, f), http.MethodPost, "/v1/submissions/create", minimalJSON).isError(t, http.StatusInternalServerError)
}

func TestMemoryMB(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1g", 1024, true}, {"512m", 512, true}, {"2048MB", 2048, true}, {" 1G ", 1024, true}, {"1t", 1 << 20, true},
		{"1024k", 1, true}, {"1073741824", 1024, true}, {"1073741824b", 1024, true}, {"4096", 0, true},
		{"1.5g", 0, false}, {"", 0, false}, {"g", 0, false}, {"-1g", 0, false}, {"1x", 0, false}, {"1 g", 0, false},
		{"99999999999999999999g", 0, false}, {"9999999p", 0, false},
	} {
		got, err := MemoryMB(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("MemoryMB(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestLauncherTemplates(t *testing.T) {
	for _, c := range []struct {
		flag string
		want []string
		ok   bool
	}{
		{"", DefaultLauncher, true},
		{"/bin/echo {{mainClass}} {{appArgs}}", []string{"/bin/echo", "{{mainClass}}", "{{appArgs}}"}, true},
		{`["/usr/bin/java", "-Xmx{{driverMemory}}", "-cp", "/opt/my jars/*:{{appResource}}", "{{mainClass}}", "{{appArgs}}"]`,
			[]string{"/usr/bin/java", "-Xmx{{driverMemory}}", "-cp", "/opt/my jars/*:{{appResource}}", "{{mainClass}}", "{{appArgs}}"}, true},
		{`[]`, nil, false},
		{`["a", 1]`, nil, false},
		{`["a"] x`, nil, false},
		{"{{mainClass}} {{appArgs}}", nil, false}, // the program must be literal
		{"run --args={{appArgs}}", nil, false},    // a list inside an element
		{"run {{mainclass}}", nil, false},         // unknown placeholder
		{"run {{mainClass}", nil, false},          // unbalanced
		{"run {{sparkConf}} {{appArgs}} {{appName}}", []string{"run", "{{sparkConf}}", "{{appArgs}}", "{{appName}}"}, true},
	} {
		got, err := SplitLauncher(c.flag)
		if (err == nil) != c.ok || (c.ok && !slices.Equal(got, c.want)) {
			t.Errorf("SplitLauncher(%q) = %q, %v; want %q, ok %v", c.flag, got, err, c.want, c.ok)
		}
	}
	if _, err := NewLauncher([]string{"a\x00"}); err == nil {
		t.Error("a NUL byte was accepted")
	}

	// Values are inserted once, never expanded again, and list
	// placeholders may expand to nothing.
	l, err := NewLauncher([]string{"/usr/bin/java", "-Xmx{{driverMemory}}", "-Dcores={{driverCores}}", "{{mainClass}}:{{appName}}", "{{appArgs}}", "{{appResource}}"})
	if err != nil {
		t.Fatal(err)
	}
	got := l.expand(launch{appResource: "{{mainClass}}", mainClass: "{{appArgs}}", appName: "$(rm -rf /)", cores: 3, memoryMB: 1536})
	want := []string{"/usr/bin/java", "-Xmx1536m", "-Dcores=3", "{{appArgs}}:$(rm -rf /)", "{{mainClass}}"}
	if !slices.Equal(got, want) {
		t.Fatalf("expand = %q, want %q", got, want)
	}
}

// FuzzCreate feeds arbitrary bodies to the create action: every answer is
// a JSON message of Spark's shapes, 200 or 400 (413 for oversized), and a
// submission that reaches the backend is one Drover's API could take.
func FuzzCreate(f *testing.F) {
	for _, s := range []string{sparkSubmitJSON, minimalJSON, "", "{}", "null", `{"action":"CreateSubmissionRequest"}`,
		`{"action":"KillSubmissionResponse"}`, strings.Replace(minimalJSON, `"pi"`, `"pi", "spark.driver.memory":"9999999p"`, 1)} {
		f.Add([]byte(s))
	}
	template := []string{"/bin/run", "{{mainClass}}", "-m{{driverMemory}}", "{{sparkConf}}", "{{appArgs}}"}
	f.Fuzz(func(t *testing.T, body []byte) {
		fb := newFake()
		l, err := NewLauncher(template)
		if err != nil {
			t.Fatal(err)
		}
		h := NewHandler(fb, anyone, l)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, sparkRequest(http.MethodPost, "/v1/submissions/create", strings.NewReader(string(body))))
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("answer is not JSON: %v\n%s", err, rec.Body)
		}
		switch rec.Code {
		case http.StatusOK:
			if m["action"] != ActionCreateSubmissionResponse || m["success"] != true || len(fb.submitted) != 1 {
				t.Fatalf("200 without a submission: %s", rec.Body)
			}
			s := fb.submitted[0]
			if s.Cores <= 0 || s.MemoryMB <= 0 || len(s.Argv) < 3 || s.Argv[0] != "/bin/run" || s.Token == "" {
				t.Fatalf("submitted %+v", s)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if m["action"] != ActionErrorResponse || len(fb.submitted) != 0 {
				t.Fatalf("%d: %s, %d submitted", rec.Code, rec.Body, len(fb.submitted))
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
