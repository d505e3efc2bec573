package strictjson

import (
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
