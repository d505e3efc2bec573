package fsm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-project/drover/model"
)

// The format versions, the byte that starts every entry. A master halts at
// an entry of a version it does not know rather than guess what its bytes
// mean; see Decode and DESIGN.md.
const (
	// FormatJSON entries hold their payload as JSON. Every version of
	// the log reads them, so Encode writes them.
	FormatJSON byte = 1
	// FormatPack entries hold their payload as MessagePack (the codec and
	// settings of snapshot frames, with the json tags as field names), which
	// decodes in less than half the time of JSON. A master older than
	// this format halts at them: a leader writes them only once every
	// voter says it reads them (see EncodeAs).
	FormatPack byte = 2
)

// IgnoreUnknownTypeFlag, set in an entry's type byte, lets a master that
// does not know the type skip the entry instead of halting (Nomad's
// structs.IgnoreUnknownTypeFlag). A master that knows the type applies the
// entry as if the flag were clear. A master that skips an entry lacks its
// effect for good, and so does every snapshot it takes; Encode sets the
// flag on the types registered ignorable, only commands whose effect older
// masters can do without: state only newer code reads and can rebuild.
// Command types stay below the flag.
const IgnoreUnknownTypeFlag model.CommandType = 0x80

// MaxCommandSize bounds an encoded command, in bytes; Decode refuses larger
// input so a corrupt or hostile entry cannot make a master allocate without
// limit.
const MaxCommandSize = 8 << 20

// Encode returns the log entry for a command in FormatJSON: the format
// byte, the command's type byte (with IgnoreUnknownTypeFlag when its type
// is registered ignorable), then the payload as JSON. An entry over
// MaxCommandSize is an error wrapping model.ErrInvalidCommand, and so is
// a command of a type not registered.
func Encode(c model.Command) ([]byte, error) {
	return EncodeAs(FormatJSON, c)
}

// EncodeAs is Encode in format version format, FormatJSON or FormatPack.
// A writer chooses FormatPack only when every master that will apply the
// entry reads it: one that does not halts there.
func EncodeAs(format byte, c model.Command) ([]byte, error) {
	t := c.CommandType()
	cmd := registered(t)
	if cmd == nil || t >= IgnoreUnknownTypeFlag {
		return nil, fmt.Errorf("%w: %s is not a registered command type", model.ErrInvalidCommand, t)
	}
	var body []byte
	var err error
	switch format {
	case FormatJSON:
		body, err = json.Marshal(c)
	case FormatPack:
		// The codec writes from the start of the slice it is given.
		err = codec.NewEncoderBytes(&body, packHandle).Encode(c)
	default:
		err = fmt.Errorf("unknown format version %d", format)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	if len(body)+2 > MaxCommandSize {
		// Refused here, before Raft commits an entry every replica would
		// then refuse to decode.
		return nil, fmt.Errorf("%w: %s of %d bytes exceeds %d", model.ErrInvalidCommand, t, len(body)+2, MaxCommandSize)
	}
	if cmd.ignorable {
		t |= IgnoreUnknownTypeFlag
	}
	out := make([]byte, 0, len(body)+2)
	out = append(out, format, byte(t))
	return append(out, body...), nil
}

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed command")

// Decode parses a log entry made by Encode or EncodeAs into its type, with
// IgnoreUnknownTypeFlag cleared, and a pointer to its payload struct.
//
// Fields of the payload that this version does not know are ignored, so
// that a field added by a newer master does not stop an older one during a
// rolling upgrade. An entry of an unknown type flagged ignorable decodes
// to its type and a nil payload: Apply skips it. An unknown version, an
// unknown type without the flag, a payload that is not one value of the
// type's struct in the entry's format (trailing data included), and an
// entry over MaxCommandSize are errors wrapping ErrMalformed.
func Decode(b []byte) (model.CommandType, model.Command, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if len(b) > MaxCommandSize {
		return 0, nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxCommandSize)
	}
	if b[0] != FormatJSON && b[0] != FormatPack {
		return 0, nil, fmt.Errorf("%w: format version %d, want %d or %d", ErrMalformed, b[0], FormatJSON, FormatPack)
	}
	t := model.CommandType(b[1]) &^ IgnoreUnknownTypeFlag
	cmd := registered(t)
	if cmd == nil {
		if model.CommandType(b[1])&IgnoreUnknownTypeFlag != 0 {
			return t, nil, nil
		}
		return 0, nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[1])
	}
	payload := cmd.payload()
	var err error
	if b[0] == FormatJSON {
		// json.Unmarshal, unlike strictjson, ignores unknown fields;
		// like it, it refuses empty input and anything after the value.
		err = json.Unmarshal(b[2:], payload)
	} else {
		// The codec ignores unknown fields too; what follows the value
		// is refused here.
		dec := codec.NewDecoderBytes(b[2:], packHandle)
		if err = dec.Decode(payload); err == nil && dec.NumBytesRead() != len(b)-2 {
			err = fmt.Errorf("%d bytes after the payload", len(b)-2-dec.NumBytesRead())
		}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %v", ErrMalformed, t, err)
	}
	return t, payload, nil
}
