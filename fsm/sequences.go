package fsm

import (
	"encoding/json"
	"fmt"
)

// RaiseSequences returns the snapshot state (as FSM.Snapshot writes it)
// with its next driver and app sequence numbers raised to at least
// nextDriver and nextApp, every other byte of the tables as it was. An
// operator's restore goes through it, so that tables rolled back past
// drivers and apps that clients already hold IDs for never name a new one
// like a lost one: IDs are unique because their sequence numbers only
// rise. A state that is not a snapshot is an error.
func RaiseSequences(state []byte, nextDriver, nextApp int) ([]byte, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(state, &file); err != nil {
		return nil, fmt.Errorf("raise sequences: %w", err)
	}
	var t map[string]json.RawMessage
	if err := json.Unmarshal(file["tables"], &t); err != nil {
		return nil, fmt.Errorf("raise sequences: tables: %w", err)
	}
	for _, f := range []struct {
		key  string
		next int
	}{{"next_driver_seq", nextDriver}, {"next_app_seq", nextApp}} {
		var cur int
		if raw, ok := t[f.key]; ok {
			if err := json.Unmarshal(raw, &cur); err != nil {
				return nil, fmt.Errorf("raise sequences: %s: %w", f.key, err)
			}
		}
		t[f.key] = json.RawMessage(fmt.Sprint(max(cur, f.next)))
	}
	tables, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	file["tables"] = tables
	return json.Marshal(file)
}
