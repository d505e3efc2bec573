package fsm

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// An entry larger than Decode accepts is refused when encoded, so Raft
// never commits one.
func TestEncodeRefusesOversizeEntry(t *testing.T) {
	reports := make([]model.AttemptReport, MaxCommandSize/16)
	_, err := Encode(&model.ReportAttempts{WorkerID: "w1", Reports: reports})
	if !errors.Is(err, model.ErrInvalidCommand) {
		t.Fatalf("Encode of an oversize command: %v, want model.ErrInvalidCommand", err)
	}
	if _, err := Encode(&model.ReportAttempts{WorkerID: "w1", Reports: reports[:10]}); err != nil {
		t.Fatal(err)
	}
}

// A snapshot whose next sequence numbers are not past its IDs would make a
// leader give an ID twice; Restore refuses it. So does an ID whose sequence
// would overflow the next one.
func TestRestoreChecksSequences(t *testing.T) {
	for name, snap := range map[string]string{
		"driver at the next seq": `{"version":1,"tables":{"drivers":{"driver-20260101000000-5":{"id":"driver-20260101000000-5","argv":["x"],"cores":1,"memory_mb":1,"state":"FINISHED","attempt":1}},"next_driver_seq":5}}`,
		"app past the next seq":  `{"version":1,"tables":{"apps":{"app-20260101000000-9":{"id":"app-20260101000000-9","cores_per_executor":1,"memory_per_executor_mb":1,"argv":["x"],"state":"FINISHED"}},"next_app_seq":3}}`,
		"next seq out of range":  `{"version":1,"tables":{"next_driver_seq":9223372036854775807}}`,
	} {
		f := New()
		if err := f.Restore(io.NopCloser(strings.NewReader(snap))); err == nil || !strings.Contains(err.Error(), "sequence number") {
			t.Errorf("%s: %v, want a refusal naming the sequence number", name, err)
		}
	}
	if _, err := idSeq(ids.Driver, "driver-20260101000000-9223372036854775807"); !errors.Is(err, model.ErrInvalidCommand) {
		t.Errorf("a sequence number of MaxInt64 was accepted: %v", err)
	}
}
