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
	"reflect"
	"strings"
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
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Field = jsonPath(reflect.TypeOf(v), te.Struct, te.Field)
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: trailing data after the object")
	}
	return nil
}

// jsonPath returns field, the path encoding/json gives to a value of the
// wrong type, without the Go names of the embedded structs on it: a
// body's fields are flat in JSON, so "DriverSpec.cores" is "cores" to
// whoever sent it. The path starts at t, or, when a type's own
// UnmarshalJSON decoded the value, at the struct type named structName
// inside t; a path that leads through neither is returned as it is.
func jsonPath(t reflect.Type, structName, field string) string {
	if p, ok := walkPath(t, field); ok {
		return p
	}
	if st := findStruct(t, structName, map[reflect.Type]bool{}); st != nil {
		if p, ok := walkPath(st, field); ok {
			return p
		}
	}
	return field
}

// walkPath follows field's segments from t, dropping those that name an
// embedded struct, and reports whether every segment named a field.
func walkPath(t reflect.Type, field string) (string, bool) {
	var kept []string
	for _, seg := range strings.Split(field, ".") {
		t = elem(t)
		if t.Kind() != reflect.Struct {
			return "", false
		}
		if f, ok := t.FieldByName(seg); ok && f.Anonymous && len(f.Index) == 1 {
			t = f.Type
			continue
		}
		next, ok := fieldByJSONName(t, seg)
		if !ok {
			return "", false
		}
		kept = append(kept, seg)
		t = next
	}
	return strings.Join(kept, "."), true
}

// elem follows pointers, slices, arrays and maps to what they hold.
func elem(t reflect.Type) reflect.Type {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return t
		}
	}
}

// findStruct returns the struct type named name among t and the types its
// fields hold, or nil.
func findStruct(t reflect.Type, name string, seen map[reflect.Type]bool) reflect.Type {
	t = elem(t)
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	if t.Name() == name {
		return t
	}
	for i := range t.NumField() {
		if found := findStruct(t.Field(i).Type, name, seen); found != nil {
			return found
		}
	}
	return nil
}

// fieldByJSONName returns the type of t's field, embedded ones included,
// that JSON names name.
func fieldByJSONName(t reflect.Type, name string) (reflect.Type, bool) {
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && f.Name == name) {
			return f.Type, true
		}
	}
	return nil, false
}
