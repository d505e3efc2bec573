package strictjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type spec struct {
	Cores int `json:"cores"`
	Inner struct {
		Size int `json:"size"`
	} `json:"inner"`
}

type request struct {
	Token string `json:"token"`
	spec
	Items []struct {
		spec
	} `json:"items"`
}

// TestTypeErrorsNameTheJSONPath: a value of the wrong type is named by its
// path in the JSON a client sent, without the Go names of embedded
// structs, which a client never sees.
func TestTypeErrorsNameTheJSONPath(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"cores":1.5}`, "Go struct field request.cores of type int"},
		{`{"inner":{"size":"x"}}`, "Go struct field .inner.size of type int"},
		{`{"items":[{"cores":"1"}]}`, "Go struct field .items.cores of type int"},
		{`{"token":7}`, "Go struct field request.token of type string"},
	} {
		var r request
		err := Decode(strings.NewReader(c.body), &r)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "spec") {
			t.Errorf("%s: %v, want it to name %q", c.body, err, c.want)
		}
	}
}

type quota struct {
	Cores     int            `json:"cores"`
	Resources map[string]int `json:"resources"`
}

type body struct {
	Weight float64           `json:"weight"`
	Env    map[string]string `json:"env"`
	Quota  quota             `json:"quota"`
	Raw    json.RawMessage   `json:"raw"`
	request
}

// A key given twice in one object, which encoding/json would take the
// last of, and a key that matches a field only when case is ignored,
// which it would take for the field, are refused in one line naming the
// key; keys of a map are compared exactly, so a map keeps "PATH" and
// "path" apart.
func TestRepeatedAndCaseVariantKeys(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"cores":2,"cores":5000000000}`, `invalid JSON: key "cores" is given twice`},
		{`{"weight":2,"Weight":3}`, `invalid JSON: key "Weight" is given twice (as "weight" and "Weight", which name the same field)`},
		{`{"Weight":3}`, `invalid JSON: key "Weight" matches field "weight" only when case is ignored; write "weight"`},
		{`{"quota":{"resources":{"gpu":0,"gpu":1}}}`, `invalid JSON: key "quota.resources.gpu" is given twice`},
		{`{"quota":{"CORES":1}}`, `invalid JSON: key "quota.CORES" matches field "cores" only when case is ignored; write "cores"`},
		{`{"items":[{"cores":1},{"cores":1,"cores":2}]}`, `invalid JSON: key "items.cores" is given twice`},
		{`{"inner":{"Size":1}}`, `invalid JSON: key "inner.Size" matches field "size" only when case is ignored; write "size"`},
		{`{"env":{"A":"1","A":"2"}}`, `invalid JSON: key "env.A" is given twice`},
		{`{"raw":{"x":1,"x":2}}`, `invalid JSON: key "raw.x" is given twice`},
		{`{"bogus":1,"bogus":2}`, `invalid JSON: key "bogus" is given twice`},
		{`{"we\u0069ght":2,"weight":3}`, `invalid JSON: key "weight" is given twice`},
		{` { "env" : { "A" : "x\"}{,:" , "B" : [ 1 , true , null , {"c":{}} ] } , "env" : {} } `, `invalid JSON: key "env" is given twice`},
	} {
		var b body
		err := Decode(strings.NewReader(c.body), &b)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	for _, ok := range []string{
		`{"weight":2,"env":{"PATH":"/bin","path":"x"},"quota":{"resources":{"gpu":1,"GPU":2}},"raw":{"X":1,"x":2}}`,
		`{"cores":1,"items":[{"cores":1},{"cores":2}],"inner":{"size":1}}`,
		` { "env" : { "A\"" : "x\\\"}{,:" , "A" : "[" } , "raw" : [ -1.5e3 , true , null , { } , [ ] ] } `,
	} {
		var b body
		if err := Decode(strings.NewReader(ok), &b); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// What is not JSON is the decoder's to refuse, in its words.
	var b body
	if err := Decode(strings.NewReader(`{"weight":2,"quota":`), &b); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("truncated body: %v", err)
	}
	deep := strings.Repeat("[", maxKeyDepth+2) + strings.Repeat("]", maxKeyDepth+2)
	var v any
	if err := Decode(strings.NewReader(deep), &v); err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
		t.Errorf("deep body: %v", err)
	}
}

// BenchmarkDecodeBatch decodes a valid body of 338 KB, a third of
// api.MaxBodyBytes: 2000 submissions of the shape of a batch, the keys'
// check included.
func BenchmarkDecodeBatch(b *testing.B) {
	type sub struct {
		Argv      []string          `json:"argv"`
		Cores     int               `json:"cores"`
		MemoryMB  int64             `json:"memory_mb"`
		Env       map[string]string `json:"env"`
		Resources map[string]int    `json:"resources"`
		Token     string            `json:"token"`
	}
	var in struct {
		Submissions []sub `json:"submissions"`
	}
	for i := range 2000 {
		in.Submissions = append(in.Submissions, sub{Argv: []string{"python3", "job.py", "--day", "2026-12-07"}, Cores: 1, MemoryMB: 1024,
			Env: map[string]string{"MODE": "batch", "REGION": "eu"}, Resources: map[string]int{"gpu": 1}, Token: strings.Repeat("t", 20) + string(rune('a'+i%26))})
	}
	data, err := json.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		out := in
		if err := Decode(bytes.NewReader(data), &out); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheckKeys holds CheckKeys to encoding/json's own reading of any
// input: on JSON that is valid, it refuses exactly when some object
// repeats a key (dupByTokens, json.Decoder.Token's view); on input that
// is not, it never panics and the decoder refuses.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":"\"}","c":0}]}}`, `{"\u0061":1,"a":2}`, `[{},[],"x",-1e3,null]`, `{"a":`, `{"a" 1}`, "{\"\xff\":1,\"\xfe\":2}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckKeys(data, nil)
		if !json.Valid(data) {
			return
		}
		if want := dupByTokens(json.NewDecoder(bytes.NewReader(data))); (err != nil) != want {
			t.Fatalf("%q: CheckKeys %v, encoding/json finds a repeated key: %v", data, err, want)
		}
	})
}

// dupByTokens reports whether the value dec reads next has an object
// that repeats a key.
func dupByTokens(dec *json.Decoder) bool {
	tok, _ := dec.Token()
	dup := false
	switch tok {
	case json.Delim('['):
		for dec.More() {
			dup = dupByTokens(dec) || dup
		}
		dec.Token()
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, _ := dec.Token()
			dup = seen[k.(string)] || dup
			seen[k.(string)] = true
			dup = dupByTokens(dec) || dup
		}
		dec.Token()
	}
	return dup
}
