package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// sequenceKeys name the next driver and app sequence numbers in the
// tables, in both snapshot versions.
var sequenceKeys = [2]string{"next_driver_seq", "next_app_seq"}

// rawHandle is packHandle that also writes codec.Raw values as they are:
// the tables of a first frame that raisePacked keeps untouched.
var rawHandle = newPackHandle(true)

// RaiseSequences returns the snapshot state (as FSM.Snapshot writes it, in
// either version, which it keeps) with its next driver and app sequence
// numbers raised to at least nextDriver and nextApp, every other byte of
// the tables as it was (in SnapshotVersion, every frame but the first as
// it was, and every other table of the first). An operator's restore goes
// through it, so that tables rolled back past drivers and apps that
// clients already hold IDs for never name a new one like a lost one: IDs
// are unique because their sequence numbers only rise. A state that is
// not a snapshot is an error.
func RaiseSequences(state []byte, nextDriver, nextApp int) ([]byte, error) {
	next := [2]int{nextDriver, nextApp}
	var out []byte
	var err error
	if packed(bufio.NewReader(bytes.NewReader(state))) {
		out, err = raisePacked(state, next)
	} else {
		out, err = raiseJSON(state, next)
	}
	if err != nil {
		return nil, fmt.Errorf("raise sequences: %w", err)
	}
	return out, nil
}

// raiseJSON is RaiseSequences for SnapshotVersionJSON.
func raiseJSON(state []byte, next [2]int) ([]byte, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(state, &file); err != nil {
		return nil, err
	}
	var t map[string]json.RawMessage
	if err := json.Unmarshal(file["tables"], &t); err != nil {
		return nil, fmt.Errorf("tables: %w", err)
	}
	for i, key := range sequenceKeys {
		var cur int
		if raw, ok := t[key]; ok {
			if err := json.Unmarshal(raw, &cur); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
		t[key] = json.RawMessage(fmt.Sprint(max(cur, next[i])))
	}
	tables, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	file["tables"] = tables
	return json.Marshal(file)
}

// raisePacked is RaiseSequences for SnapshotVersion: it rewrites the first
// frame only, whose tables it keeps as raw bytes but for the two numbers.
func raisePacked(state []byte, next [2]int) ([]byte, error) {
	nl := bytes.IndexByte(state, '\n')
	n, k := binary.Uvarint(state[nl+1:])
	start := nl + 1 + k
	if nl < 0 || k <= 0 || n == 0 || n > uint64(len(state)-start) {
		return nil, errors.New("invalid frames: the tables frame is missing")
	}
	end := start + int(n)
	var t map[string]codec.Raw
	if err := codec.NewDecoderBytes(state[start:end], packHandle).Decode(&t); err != nil {
		return nil, fmt.Errorf("invalid frame: %v", err)
	}
	for i, key := range sequenceKeys {
		var cur int
		if raw, ok := t[key]; ok {
			if err := codec.NewDecoderBytes(raw, packHandle).Decode(&cur); err != nil {
				return nil, fmt.Errorf("%s: %v", key, err)
			}
		}
		var raw []byte
		if err := codec.NewEncoderBytes(&raw, packHandle).Encode(max(cur, next[i])); err != nil {
			return nil, err
		}
		t[key] = raw
	}
	var frame []byte
	if err := codec.NewEncoderBytes(&frame, rawHandle).Encode(t); err != nil {
		return nil, err
	}
	out := append([]byte{}, state[:nl+1]...)
	out = binary.AppendUvarint(out, uint64(len(frame)))
	out = append(out, frame...)
	return append(out, state[end:]...), nil
}
