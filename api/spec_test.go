package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// A submission's body is the one it was when SubmitRequest declared its
// program's fields itself, not model.DriverSpec: the same names in the
// same order, and a master still refuses a field it does not know.
func TestSubmitRequestKeepsItsBytes(t *testing.T) {
	type oldSubmitRequest struct {
		Token           string                `json:"token"`
		Name            string                `json:"name,omitempty"`
		Argv            []string              `json:"argv"`
		Env             map[string]string     `json:"env,omitempty"`
		Cores           int                   `json:"cores"`
		MemoryMB        int64                 `json:"memory_mb"`
		Supervise       bool                  `json:"supervise"`
		Artifacts       []model.Artifact      `json:"artifacts,omitempty"`
		Resources       model.ResourceAmounts `json:"resources,omitempty"`
		MaxRestarts     int                   `json:"max_restarts,omitempty"`
		RestartWindowMS int64                 `json:"restart_window_ms,omitempty"`
		RescheduleAfter int                   `json:"reschedule_after,omitempty"`
		User            string                `json:"user,omitempty"`
	}
	arts := []model.Artifact{{Source: "https://example.com/job.jar", Dest: "lib", Mode: 0o755}}
	old := oldSubmitRequest{Token: "t", Name: "n", Argv: []string{"a", "<b>"}, Env: map[string]string{"K": "v"}, Cores: 2, MemoryMB: 512,
		Supervise: true, Artifacts: arts, Resources: model.ResourceAmounts{"gpu": 1},
		MaxRestarts: 3, RestartWindowMS: 60000, RescheduleAfter: 2, User: "etl"}
	req := SubmitRequest{Token: "t", Name: "n", DriverSpec: model.DriverSpec{Argv: []string{"a", "<b>"}, Env: map[string]string{"K": "v"}, Cores: 2, MemoryMB: 512,
		Supervise: true, Artifacts: arts, Resources: model.ResourceAmounts{"gpu": 1},
		MaxRestarts: 3, RestartWindowMS: 60000, RescheduleAfter: 2, User: "etl"}}
	want, err := Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("body\n%s\nwant\n%s", got, want)
	}
	var back SubmitRequest
	if err := strictjson.Decode(bytes.NewReader(want), &back); err != nil || back.User != "etl" || back.RestartWindowMS != 60000 {
		t.Fatalf("decoding the old body: %v, %+v", err, back)
	}
	for _, field := range []string{"bogus", "driver_spec", "DriverSpec", "executor_limit"} {
		body := `{"token":"t","argv":["a"],"cores":1,"memory_mb":1,"` + field + `":{}}`
		if err := strictjson.Decode(strings.NewReader(body), &back); err == nil {
			t.Errorf("a body with %q decoded", field)
		}
	}
	// A batch reads its submissions as strictly.
	var batch SubmitBatchRequest
	if err := json.Unmarshal([]byte(`{"submissions":[{"token":"t","argv":["a"],"DriverSpec":{}}]}`), &batch); err == nil {
		t.Error("a batch with a DriverSpec field decoded")
	}
}

// TestTypeErrorsNameTheBodysFields: a value of the wrong type is named as
// the body names it, alone or in a batch, never through the spec a
// submission embeds.
func TestTypeErrorsNameTheBodysFields(t *testing.T) {
	for _, c := range []struct {
		body string
		into any
	}{
		{`{"token":"x","argv":["a"],"cores":1.5,"memory_mb":16}`, new(SubmitRequest)},
		{`{"submissions":[{"token":"x","argv":["a"],"cores":"1","memory_mb":16}]}`, new(SubmitBatchRequest)},
	} {
		err := strictjson.Decode(strings.NewReader(c.body), c.into)
		if err == nil || !strings.Contains(err.Error(), "Go struct field SubmitRequest.cores of type int") {
			t.Errorf("%s: %v, want it to name SubmitRequest.cores", c.body, err)
		}
	}
}
