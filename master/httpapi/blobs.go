package httpapi

import (
	"io"
	"net/http"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
)

// transferIdle is how long an upload's body or a download may stall
// before the connection is dropped. The listener's ReadTimeout and
// WriteTimeout fit a JSON body; a file of hundreds of MiB on a slow link
// takes longer, so each byte moved pushes the deadline this far ahead.
const transferIdle = 30 * time.Second

// answerTimeout bounds the writing of an upload's answer, which comes
// after the body was read and the pushes to the other voters answered.
const answerTimeout = 10 * time.Second

// upload serves PUT /v1/blobs/{id}: the body is the file. The service
// reads the body only when the file is new to this master, so a client
// that sent Expect: 100-continue sends no bytes for a file held already.
func (h *handlers) upload(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	// The answer waits for the body and the pushes, however long they
	// take without stalling.
	_ = rc.SetWriteDeadline(time.Time{})
	out, err := service.V1Upload.Call(r.Context(), h.Chain, c, service.Request[service.Upload]{
		ID: r.PathValue("id"), Body: service.Upload{Size: r.ContentLength, Body: idleReader{r.Body, rc}}})
	_ = rc.SetWriteDeadline(time.Now().Add(answerTimeout))
	h.reply(w, out, err)
}

// blob serves GET and HEAD /v1/blobs/{id} with http.ServeContent, which
// answers HEAD without the bytes and Range requests (a fetch that resumes)
// with a part; the ETag is the digest, since the bytes of a digest never
// change.
func (h *handlers) blob(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	b, err := service.V1Blob.Call(r.Context(), h.Chain, c, service.Request[api.NoBody]{ID: r.PathValue("id")})
	if err != nil {
		h.writeError(w, err)
		return
	}
	defer b.Body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("ETag", `"`+b.SHA256+`"`)
	http.ServeContent(idleWriter{w, http.NewResponseController(w)}, r, "", time.Time{}, b.Body)
}

// idleReader moves the connection's read deadline transferIdle ahead
// before each Read.
type idleReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (b idleReader) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(transferIdle))
	return b.r.Read(p)
}

// idleWriter moves the connection's write deadline transferIdle ahead
// before each Write.
type idleWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (w idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(transferIdle))
	return w.ResponseWriter.Write(p)
}
