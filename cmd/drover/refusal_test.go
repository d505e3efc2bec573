package main

import (
	"errors"
	"strings"
	"testing"
)

// A refusal's line quotes an input whole up to 64 bytes and past that as
// its first 64 bytes, whole runes, and its length, however many quoted
// inputs it has and whatever they hold (escaped quotes, a lone quote).
func TestErrorLineBoundsQuotes(t *testing.T) {
	a64, a65 := strings.Repeat("a", 64), strings.Repeat("a", 65)
	for _, c := range []struct{ in, want string }{
		{`zone "` + a64 + `" unknown`, `zone "` + a64 + `" unknown`},
		{`zone "` + a65 + `" unknown`, `zone "` + a64 + `"... (65 bytes) unknown`},
		{`"` + a65 + `" and "` + a65 + `x"`, `"` + a64 + `"... (65 bytes) and "` + a64 + `"... (66 bytes)`},
		// A rune across byte 64 is left out whole.
		{`"` + strings.Repeat("a", 63) + `é"`, `"` + strings.Repeat("a", 63) + `"... (65 bytes)`},
		{`"` + strings.Repeat(`\"`, 65) + `"`, `"` + strings.Repeat(`\"`, 64) + `"... (65 bytes)`},
		{`the driver's "` + a65 + `" and a lone " here`, `the driver's "` + a64 + `"... (65 bytes) and a lone " here`},
		{"two\nlines", "two; lines"},
	} {
		if got := errorLine(errors.New(c.in)); got != c.want {
			t.Errorf("errorLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
