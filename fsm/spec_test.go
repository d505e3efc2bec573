package fsm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-project/drover/model"
)

// The shapes of the command and rows before their programs became
// model.DriverSpec and model.ExecutorSpec: each declared its program's
// fields itself. They are kept here only to hold the new shapes to the old
// bytes.
type (
	oldSubmitDriver struct {
		ID              string                `json:"id"`
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
		Time            int64                 `json:"time"`
		Client          string                `json:"client,omitempty"`
	}
	oldDriver struct {
		ID              string                `json:"id"`
		Name            string                `json:"name,omitempty"`
		Token           string                `json:"token,omitempty"`
		Client          string                `json:"client,omitempty"`
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
		State           model.DriverState     `json:"state"`
		WorkerID        string                `json:"worker_id"`
		Attempt         int                   `json:"attempt"`
		ExitCode        *int                  `json:"exit_code"`
		Message         string                `json:"message,omitempty"`
		Staging         bool                  `json:"staging,omitempty"`
		SubmittedAt     int64                 `json:"submitted_at"`
		UpdatedAt       int64                 `json:"updated_at"`
		Attempts        []model.Attempt       `json:"attempts"`
		ModifyIndex     uint64                `json:"modify_index,omitempty"`
	}
	oldApp struct {
		ID                   string                 `json:"id"`
		Name                 string                 `json:"name,omitempty"`
		Token                string                 `json:"token,omitempty"`
		DriverID             string                 `json:"driver_id,omitempty"`
		DriverAttempt        int                    `json:"driver_attempt,omitempty"`
		DriverRun            int                    `json:"driver_run,omitempty"`
		MaxCores             int                    `json:"max_cores"`
		CoresPerExecutor     int                    `json:"cores_per_executor"`
		MemoryPerExecutorMB  int64                  `json:"memory_per_executor_mb"`
		ExecutorLimit        int                    `json:"executor_limit"`
		Argv                 []string               `json:"argv"`
		Env                  map[string]string      `json:"env,omitempty"`
		Artifacts            []model.Artifact       `json:"artifacts,omitempty"`
		ResourcesPerExecutor model.ResourceAmounts  `json:"resources_per_executor,omitempty"`
		User                 string                 `json:"user,omitempty"`
		MaxExecutorRetries   int                    `json:"max_executor_retries"`
		State                model.ApplicationState `json:"state"`
		RetryCount           int                    `json:"retry_count"`
		NextExecutorID       int                    `json:"next_executor_id"`
		FirstExecutorID      int                    `json:"first_executor_id,omitempty"`
		CoresGranted         int                    `json:"cores_granted"`
		Message              string                 `json:"message,omitempty"`
		SubmittedAt          int64                  `json:"submitted_at"`
		UpdatedAt            int64                  `json:"updated_at"`
		EndedAt              int64                  `json:"ended_at,omitempty"`
		ModifyIndex          uint64                 `json:"modify_index,omitempty"`
	}
)

// CommandType makes the old shape a SubmitDriver payload, as the entries
// older masters wrote hold it.
func (*oldSubmitDriver) CommandType() model.CommandType { return model.CmdSubmitDriver }

// fill sets every field of v, however deep, to a value that is not its
// zero, each string to its own text, so that omitempty hides none and a
// field that lands under another name shows.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)) + string(rune('a'+*n/26%26)))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	}
}

// The command and rows that embed a program spec encode to the bytes
// their old shapes did, every field set: entries in both formats,
// snapshot frames in MessagePack, and rows in JSON (the API, events and
// StateHash); and an entry an older master wrote decodes to the value.
func TestProgramSpecKeepsTheBytes(t *testing.T) {
	for _, tc := range []struct {
		t        model.CommandType // 0 for a row
		old, new any
	}{
		{model.CmdSubmitDriver, &oldSubmitDriver{}, &model.SubmitDriver{}},
		{0, &oldDriver{}, &model.Driver{}},
		{0, &oldApp{}, &model.App{}},
	} {
		name := reflect.TypeOf(tc.new).Elem().Name()
		n := 0
		fill(reflect.ValueOf(tc.old).Elem(), &n)
		oldJSON, err := json.Marshal(tc.old)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(oldJSON, tc.new); err != nil {
			t.Fatal(err)
		}
		newJSON, err := json.Marshal(tc.new)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(oldJSON, newJSON) {
			t.Errorf("%s JSON:\nold %s\nnew %s", name, oldJSON, newJSON)
		}
		var oldPack, newPack []byte
		if err := codec.NewEncoderBytes(&oldPack, packHandle).Encode(tc.old); err != nil {
			t.Fatal(err)
		}
		if err := codec.NewEncoderBytes(&newPack, packHandle).Encode(tc.new); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(oldPack, newPack) {
			t.Errorf("%s MessagePack:\nold %x\nnew %x", name, oldPack, newPack)
		}
		if tc.t == 0 {
			continue
		}
		for _, format := range []byte{FormatJSON, FormatPack} {
			oldEntry, err := EncodeAs(format, tc.old.(model.Command))
			if err != nil {
				t.Fatal(err)
			}
			newEntry, err := EncodeAs(format, tc.new.(model.Command))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(oldEntry, newEntry) {
				t.Errorf("%s entry in format %d:\nold %x\nnew %x", name, format, oldEntry, newEntry)
			}
			// The entry an older master wrote decodes to the value.
			_, payload, err := Decode(oldEntry)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(payload, tc.new) {
				t.Errorf("%s entry in format %d decodes to %+v, want %+v", name, format, payload, tc.new)
			}
		}
	}
}
