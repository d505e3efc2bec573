package fsm

import (
	"errors"
	"testing"
)

// An entry larger than Decode accepts is refused when encoded, so Raft
// never commits one.
func TestEncodeRefusesOversizeEntry(t *testing.T) {
	reports := make([]AttemptReport, MaxCommandSize/16)
	_, err := Encode(CmdReportAttempts, &ReportAttempts{WorkerID: "w1", Reports: reports})
	if !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("Encode of an oversize command: %v, want ErrInvalidCommand", err)
	}
	if _, err := Encode(CmdReportAttempts, &ReportAttempts{WorkerID: "w1", Reports: reports[:10]}); err != nil {
		t.Fatal(err)
	}
}
