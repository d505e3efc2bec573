package api

import (
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// ContentTypeJSON is the media type of every JSON request body, which
// every JSON writer (the Go client, a forwarding master) declares.
const ContentTypeJSON = "application/json"

// ContentTypeTar is the media type of a snapshot archive, which the Go
// client and a forwarding master declare when they restore one.
const ContentTypeTar = "application/x-tar"

// CheckJSON refuses, with an error wrapping ErrUnsupportedMediaType (415),
// a request whose body is JSON to its endpoint but whose Content-Type does
// not say application/json. Parameters are allowed
// (application/json;charset=UTF-8, as many Java clients send; Spark's
// RestSubmissionClient sends application/json and the charset in a header
// of its own). The type is what makes a cross-site write
// impossible from a browser without asking the node first: a page of
// another site may make a browser post text/plain, a form or multipart
// without a CORS preflight, never application/json (the Fetch standard's
// CORS-safelisted request headers). A listener calls it before it reads
// the body.
func CheckJSON(h http.Header) error { return checkType(h, "JSON", ContentTypeJSON) }

// CheckArchive refuses, as CheckJSON does, a snapshot restore whose
// Content-Type is neither application/x-tar (ContentTypeTar) nor
// application/octet-stream: neither is a type a browser posts across
// sites without a CORS preflight, so no page of another site can carry a
// restore, even past the origin check. A listener calls it before it
// reads the body.
func CheckArchive(h http.Header) error {
	return checkType(h, "a snapshot archive", ContentTypeTar, "application/octet-stream")
}

// checkType refuses a request whose Content-Type is none of types (case
// ignored, parameters allowed), naming what its body is and the types it
// takes.
func checkType(h http.Header, body string, types ...string) error {
	ct := h.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if (err == nil || err == mime.ErrInvalidMediaParameter) && slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(mt, t) }) {
		return nil
	}
	want := strings.Join(types, " or ")
	if ct == "" {
		return Errorf(ErrUnsupportedMediaType, "this request's body is %s: send it with Content-Type: %s (it had none)", body, want)
	}
	return Errorf(ErrUnsupportedMediaType, "this request's body is %s: send it with Content-Type: %s, not %s", body, want, QuoteHeader(ct))
}

// maxQuoted is how much of a header value a refusal repeats: enough to
// recognise it, not the 64 KiB a header may hold.
const maxQuoted = 100

// QuoteHeader quotes a header value (Go syntax) for a refusal's message,
// cut to its first 100 bytes.
func QuoteHeader(v string) string {
	if len(v) > maxQuoted {
		return fmt.Sprintf("%q...", v[:maxQuoted])
	}
	return fmt.Sprintf("%q", v)
}
