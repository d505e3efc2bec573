package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxQuoted bounds, in bytes, an input a refusal quotes: a 5,000-byte
// --time-zone is echoed as its first maxQuoted bytes and its length, so
// that the one line stays one screen line's worth. A display bound, not
// an input's, so it has no flag.
const maxQuoted = 64

// errorLine is err as the one line a command prints: newlines made "; ",
// and each quoted string (Go's %q, as every refusal here and the
// masters' quote an input) longer than maxQuoted bytes cut to its first
// maxQuoted, whole runes, then `... (N bytes)`:
// `unknown time zone "AAAA..."... (5000 bytes) (an IANA name ...)`.
// Quoted strings are found with strconv.QuotedPrefix, so escaped quotes
// inside them are read as Go wrote them.
func errorLine(err error) string {
	line := strings.ReplaceAll(err.Error(), "\n", "; ")
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '"')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		line = line[i:]
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			b.WriteByte('"')
			line = line[1:]
			continue
		}
		line = line[len(q):]
		s, _ := strconv.Unquote(q)
		if len(s) <= maxQuoted {
			b.WriteString(q)
			continue
		}
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		b.WriteString(strconv.Quote(s[:cut]) + "... (" + strconv.Itoa(len(s)) + " bytes)")
	}
}
