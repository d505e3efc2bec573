// Package strictjson decodes JSON that comes from outside a process (HTTP
// bodies, files, snapshots) and refuses anything it was not built for.
// Raft log entries are not decoded with it: a field a newer master added
// must not stop an older one (see fsm/DESIGN.md).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Decode reads exactly one JSON value from r into v. Unknown fields, a second
// value or other trailing data, and an empty input are errors; so is a key
// given twice in one object (CheckKeys), which encoding/json would let the
// last one win. The error text is one line fit to show a user.
//
// The input is read whole before it is decoded: the check of keys is a
// pass of its own over it. Callers bound what they pass (an HTTP body's
// limit, a file's size).
func Decode(r io.Reader, v any) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if err := CheckKeys(b, reflect.TypeOf(v)); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
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

// maxKeyDepth bounds the nesting CheckKeys follows, as encoding/json
// bounds what it decodes (10000): deeper input is left to the decoder,
// which refuses it.
const maxKeyDepth = 10000

// CheckKeys refuses, in one line naming the key and its path, what
// encoding/json would take silently in data, the first JSON value,
// decoded into a value of type t: a key given twice in one object (the
// last would win), and a key that matches a field of a struct only when
// case is ignored ("Weight" for "weight"), which encoding/json takes for
// the field. Keys of an object decoded into a struct are compared as
// encoding/json compares them, ignoring case, so "weight" and "Weight" in
// one object are a repeat; those of a map, or of a value of no known
// shape, are compared exactly, since a map keeps "PATH" and "path" apart.
// Malformed or too deeply nested input passes: the decoder refuses it in
// its own words.
func CheckKeys(data []byte, t reflect.Type) error {
	err := (&keyScanner{data: data}).value(t, nil, 0)
	if errors.Is(err, errMalformed) {
		return nil
	}
	return err
}

// errMalformed stops CheckKeys at input that is not JSON, or nested past
// maxKeyDepth.
var errMalformed = errors.New("malformed")

// keyPath is where a value sits: the keys that lead to it, innermost
// last. It is made into a string only for an error.
type keyPath struct {
	parent *keyPath
	key    string
}

func (p *keyPath) String() string {
	if p.parent == nil {
		return p.key
	}
	return p.parent.String() + "." + p.key
}

// keyScanner walks JSON for CheckKeys: it reads keys and skips every
// other value, validating no more than it needs to find its way, since
// the decoder validates after it. It is ours rather than
// json.Decoder.Token, which costs several allocations a token: on a
// batch body of 338 KB (BenchmarkDecodeBatch) Decode takes 12 ms with
// it and 7.8 ms without the check, where Token took 40 ms.
type keyScanner struct {
	data []byte
	i    int
}

// next skips white space and returns the byte at it, 0 at the end.
func (s *keyScanner) next() byte {
	for ; s.i < len(s.data); s.i++ {
		switch c := s.data[s.i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

// str reads a string, its opening quote at s.i, and returns it as the
// decoder reads it.
func (s *keyScanner) str() (string, error) {
	start, escaped := s.i, false
	for s.i++; s.i < len(s.data); s.i++ {
		switch s.data[s.i] {
		case '\\':
			escaped = true
			s.i++
		case '"':
			s.i++
			// Escapes and bytes that are not UTF-8 (each read as
			// U+FFFD) are the decoder's to read.
			if raw := s.data[start+1 : s.i-1]; !escaped && utf8.Valid(raw) {
				return string(raw), nil
			}
			var out string
			if json.Unmarshal(s.data[start:s.i], &out) != nil {
				return "", errMalformed
			}
			return out, nil
		}
	}
	return "", errMalformed
}

// value reads one value, expected of type t (nil when no shape is
// known), at path (nil at the top).
func (s *keyScanner) value(t reflect.Type, path *keyPath, depth int) error {
	if depth > maxKeyDepth {
		return errMalformed
	}
	switch s.next() {
	case '{':
		return s.object(shape(t), path, depth)
	case '[':
		var el reflect.Type
		if t = shape(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			el = t.Elem()
		}
		s.i++
		if s.next() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.value(el, path, depth+1); err != nil {
				return err
			}
			c := s.next()
			s.i++
			if c == ']' {
				return nil
			}
			if c != ',' {
				return errMalformed
			}
		}
	case '"':
		_, err := s.str()
		return err
	case 0:
		return errMalformed
	}
	// A number, true, false or null: the decoder checks which.
	start := s.i
	for ; s.i < len(s.data) && !strings.ContainsRune(",]} \t\n\r", rune(s.data[s.i])); s.i++ {
	}
	if s.i == start {
		return errMalformed
	}
	return nil
}

// object reads an object, its '{' at s.i, decoded into t.
func (s *keyScanner) object(t reflect.Type, path *keyPath, depth int) error {
	var fields map[string]field
	if t != nil && t.Kind() == reflect.Struct {
		fields = fieldsOf(t)
	}
	var seen keySet
	s.i++
	if s.next() == '}' {
		s.i++
		return nil
	}
	for {
		if s.next() != '"' {
			return errMalformed
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.next() != ':' {
			return errMalformed
		}
		s.i++
		at := &keyPath{parent: path, key: key}
		id := key
		if fields != nil {
			id = foldName(key)
		}
		if first, ok := seen.add(id, key); ok {
			if first == key {
				return fmt.Errorf("key %q is given twice", at.String())
			}
			return fmt.Errorf("key %q is given twice (as %q and %q, which name the same field)", at.String(), first, key)
		}
		var next reflect.Type
		switch {
		case fields != nil:
			f, ok := fields[id]
			if ok && f.name != key {
				return fmt.Errorf("key %q matches field %q only when case is ignored; write %q", at.String(), f.name, f.name)
			}
			next = f.typ
		case t != nil && t.Kind() == reflect.Map:
			next = t.Elem()
		}
		if err := s.value(next, at, depth+1); err != nil {
			return err
		}
		c := s.next()
		s.i++
		if c == '}' {
			return nil
		}
		if c != ',' {
			return errMalformed
		}
	}
}

// keySet holds the keys of one object met so far, by the identity they
// are compared under, with the key as given: in a slice while they are
// few, as most objects' are, in a map beyond.
type keySet struct {
	few  []string
	many map[string]string
}

// manyKeys is when a keySet moves to a map.
const manyKeys = 16

// add adds key under id and returns the key first given under id, if
// one was.
func (ks *keySet) add(id, key string) (string, bool) {
	if ks.many != nil {
		if first, ok := ks.many[id]; ok {
			return first, true
		}
		ks.many[id] = key
		return "", false
	}
	for i := 0; i < len(ks.few); i += 2 {
		if ks.few[i] == id {
			return ks.few[i+1], true
		}
	}
	ks.few = append(ks.few, id, key)
	if len(ks.few) > 2*manyKeys {
		ks.many = make(map[string]string, len(ks.few))
		for i := 0; i < len(ks.few); i += 2 {
			ks.many[ks.few[i]] = ks.few[i+1]
		}
	}
	return "", false
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// shape returns the type whose JSON shape t decodes by, pointers
// followed, or nil when the type decodes itself (json.Unmarshaler, such
// as json.RawMessage) or takes any shape (an interface).
func shape(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) || t.Kind() == reflect.Interface {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			return t
		}
		t = t.Elem()
	}
	return nil
}

// field is a struct field as JSON names it.
type field struct {
	name  string
	typ   reflect.Type
	depth int
}

// fieldCache holds fieldsOf's answers by type: a body's objects are
// mostly of a few types, and reflection per object would cost more than
// the rest of the check.
var fieldCache sync.Map // reflect.Type -> map[string]field

// fieldsOf returns the JSON fields of struct type t, promoted ones of
// embedded structs included, by their folded names (foldName).
func fieldsOf(t reflect.Type) map[string]field {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]field)
	}
	out := map[string]field{}
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
			continue
		case f.Anonymous && tag == "" && shape(f.Type) != nil && shape(f.Type).Kind() == reflect.Struct:
			// Its fields are promoted, and VisibleFields lists them.
			continue
		case !f.IsExported() && !f.Anonymous:
			continue
		}
		name := tag
		if name == "" {
			name = f.Name
		}
		// The shallowest field of a name wins, as encoding/json's
		// dominance rule has it.
		if prev, ok := out[foldName(name)]; !ok || len(f.Index) < prev.depth {
			out[foldName(name)] = field{name: name, typ: f.Type, depth: len(f.Index)}
		}
	}
	fieldCache.Store(t, out)
	return out
}

// foldName folds a key as encoding/json does to match it to a field
// without regard to case: each rune to upper case of its lower case.
// The standard library keeps its own unexported, hence this copy.
func foldName(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, s)
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
