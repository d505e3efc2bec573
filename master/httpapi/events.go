package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
)

// keepalive is how often an idle event stream sends a comment, so that
// proxies keep it open and a vanished reader is noticed.
const keepalive = 15 * time.Second

// events serves GET /v1/events as server-sent events (the HTML living
// standard's text/event-stream): one message per row change, named after
// its kind ("driver", "app", "executor", "worker"; "reset" and "error"),
// whose data is the api.Event as JSON. The last message of each Raft entry
// carries the entry's index as its id, so a reader that reconnects with
// Last-Event-ID (or ?index=) resumes after the last entry it saw whole, on
// this master or another. ?kind= and ?id= take comma lists.
func (h *handlers) events(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	q, err := eventQuery(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	st, err := service.V1Events.Call(r.Context(), h.Chain, c, service.Request[service.EventQuery]{Body: q})
	if err != nil {
		h.writeError(w, err)
		return
	}
	defer st.Close()
	// A stream lasts as long as its reader reads: the server's write
	// deadline gives way to one pushed ahead at each write. The read
	// deadline goes too: net/http ends the request's context when it
	// passes.
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: h.EventWriteTimeout}
	_ = sw.rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	if err := sw.push(); err != nil {
		return
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(sw)
	flush := func() bool { return bw.Flush() == nil && sw.flush() == nil }
	last := q.After
	if len(st.First) > 0 {
		writeBatch(bw, st.First)
		last = st.First[0].Index
	}
	if !flush() {
		return
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			_, _ = bw.WriteString(": keepalive\n\n")
		case <-st.Sub.Ready():
			batches, err := st.Take()
			if err != nil {
				code, _ := api.CodeOf(err)
				writeMessage(bw, "error", "", struct {
					api.Error
					Index uint64 `json:"index"`
				}{api.Error{Error: err.Error() + "; resume from index " + strconv.FormatUint(last, 10), Code: code}, last})
				flush()
				return
			}
			for _, b := range batches {
				writeBatch(bw, b.Events)
				last = b.Index
			}
		}
		if !flush() {
			return
		}
	}
}

// streamWriter writes an event stream to its connection, moving the
// connection's write deadline timeout ahead before each write and flush.
// A reader that stops reading fills its connection's buffers, and the
// write that then waits fails within timeout, which ends the stream and
// gives back its slot; a reader that keeps reading is never cut off,
// however long the stream lasts. The writes it sees are a bufio.Writer's
// (some 4 KiB each) and net/http's, whose own buffer writes to the
// connection only within them.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// push moves the write deadline to timeout from now.
func (s *streamWriter) push() error {
	return s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if err := s.push(); err != nil {
		return 0, err
	}
	return s.w.Write(p)
}

// flush sends what net/http holds of the answer to the connection.
func (s *streamWriter) flush() error {
	if err := s.push(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// writeBatch writes the events of one entry, the last with the entry's
// index as its id.
func writeBatch(bw *bufio.Writer, evs []api.Event) {
	for i, e := range evs {
		id := ""
		if i == len(evs)-1 {
			id = strconv.FormatUint(e.Index, 10)
		}
		name := string(e.Kind)
		if e.Op == api.OpReset {
			name = api.OpReset
		}
		writeMessage(bw, name, id, e)
	}
}

// writeMessage writes one server-sent event; JSON holds no newline, so the
// data is one line.
func writeMessage(bw *bufio.Writer, event, id string, data any) {
	b, _ := json.Marshal(data)
	_, _ = bw.WriteString("event: " + event + "\n")
	if id != "" {
		_, _ = bw.WriteString("id: " + id + "\n")
	}
	_, _ = bw.WriteString("data: ")
	_, _ = bw.Write(b)
	_, _ = bw.WriteString("\n\n")
}

// eventQuery decodes index (or Last-Event-ID, which wins), kind and id.
func eventQuery(r *http.Request) (service.EventQuery, error) {
	var q service.EventQuery
	v := r.URL.Query()
	idx := v.Get("index")
	if le := r.Header.Get("Last-Event-ID"); le != "" {
		idx = le
	}
	if idx != "" {
		n, err := strconv.ParseUint(idx, 10, 64)
		if err != nil {
			return q, api.Errorf(api.ErrInvalidRequest, "index %q is not a Raft index", idx)
		}
		q.After = n
	}
	for _, k := range splitList(v["kind"]) {
		q.Kinds = append(q.Kinds, api.EventKind(k))
	}
	q.IDs = splitList(v["id"])
	return q, nil
}

// splitList splits repeated, comma-separated query values.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
