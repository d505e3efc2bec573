package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// FormatVersion is the version byte that starts every encoded command. A
// master refuses entries of a version it does not know rather than guess.
const FormatVersion byte = 1

// MaxCommandSize bounds an encoded command, in bytes; Decode refuses larger
// input so a corrupt or hostile entry cannot make a master allocate without
// limit.
const MaxCommandSize = 8 << 20

// Encode returns the log entry for a command: FormatVersion, the type byte,
// then the payload as JSON. An entry over MaxCommandSize is an error
// wrapping ErrInvalidCommand.
func Encode(t model.CommandType, payload any) ([]byte, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	if len(body)+2 > MaxCommandSize {
		// Refused here, before Raft commits an entry every replica would
		// then refuse to decode.
		return nil, fmt.Errorf("%w: %s of %d bytes exceeds %d", model.ErrInvalidCommand, t, len(body)+2, MaxCommandSize)
	}
	out := make([]byte, 0, len(body)+2)
	out = append(out, FormatVersion, byte(t))
	return append(out, body...), nil
}

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed command")

// Decode parses a log entry made by Encode into its type and a pointer to its
// payload struct. Unknown versions, types or fields, trailing data and
// oversize entries are errors wrapping ErrMalformed.
func Decode(b []byte) (model.CommandType, any, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if len(b) > MaxCommandSize {
		return 0, nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxCommandSize)
	}
	if b[0] != FormatVersion {
		return 0, nil, fmt.Errorf("%w: format version %d, want %d", ErrMalformed, b[0], FormatVersion)
	}
	t := model.CommandType(b[1])
	var payload any
	switch t {
	case model.CmdRegisterWorker:
		payload = new(model.RegisterWorker)
	case model.CmdSubmitDriver:
		payload = new(model.SubmitDriver)
	case model.CmdPlaceDrivers:
		payload = new(model.PlaceDrivers)
	case model.CmdReportAttempts:
		payload = new(model.ReportAttempts)
	case model.CmdKillDriver:
		payload = new(model.KillDriver)
	case model.CmdWorkerLost:
		payload = new(model.WorkerLost)
	case model.CmdDecommissionWorker:
		payload = new(model.DecommissionWorker)
	case model.CmdRegisterApp:
		payload = new(model.RegisterApp)
	case model.CmdPlaceExecutors:
		payload = new(model.PlaceExecutors)
	case model.CmdRequestExecutors:
		payload = new(model.RequestExecutors)
	case model.CmdKillExecutors:
		payload = new(model.KillExecutors)
	case model.CmdEndApp:
		payload = new(model.EndApp)
	case model.CmdPruneCompleted:
		payload = new(model.PruneCompleted)
	default:
		return 0, nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[1])
	}
	if err := strictjson.Decode(bytes.NewReader(b[2:]), payload); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %v", ErrMalformed, t, err)
	}
	return t, payload, nil
}
