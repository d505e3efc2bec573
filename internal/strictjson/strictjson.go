// Package strictjson decodes JSON that comes from outside a process (HTTP
// bodies, files, snapshots) and refuses anything it was not built for.
// Raft log entries are not decoded with it: a field a newer master added
// must not stop an older one (see fsm/DESIGN.md).
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Decode reads exactly one JSON value from r into v. Unknown fields, a second
// value or other trailing data, and an empty input are errors; the error
// text is one line fit to show a user.
func Decode(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty body, want a JSON object")
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: trailing data after the object")
	}
	return nil
}
