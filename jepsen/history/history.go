// Package history records what the suite's clients and nemesis did, as
// Jepsen does: every operation is an invoke event followed by ok, fail or
// info (indeterminate: a timeout or a lost leader, which may or may not have
// taken effect), and faults are start/stop pairs. Events are written as JSON
// lines while the run goes, so a crashed run still leaves its history.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Type is an event's kind, with Jepsen's names.
type Type string

// Event types.
const (
	// Invoke: a client sent a request (or the nemesis began a fault).
	Invoke Type = "invoke"
	// OK: the request took effect, and its answer is in the event.
	OK Type = "ok"
	// Fail: the request certainly did not take effect (an authoritative
	// refusal).
	Fail Type = "fail"
	// Info: the outcome is unknown (timeout, no leader, connection cut):
	// the request may take effect at any later time.
	Info Type = "info"
)

// Functions: what an operation does.
const (
	FSubmit = "submit" // submit a driver; Token, Supervise, Namespace in; Driver out
	FRead   = "read"   // read a driver's status; Driver in; State, Attempt out
	FKill   = "kill"   // kill a driver; Driver in
	FStart  = "start"  // nemesis: a fault begins; Fault, Targets
	FStop   = "stop"   // nemesis: the fault with the same Window ends
	// FScheduleRun asks a schedule for a manual run (POST
	// /v1/schedules/{name}/run); Schedule in, Driver out.
	FScheduleRun = "schedule-run"
)

// NemesisProcess is the Process of nemesis events.
const NemesisProcess = -1

// Op is one event. Time is Unix nanoseconds when the event happened.
type Op struct {
	Index   int    `json:"index"`
	Process int    `json:"process"`
	Type    Type   `json:"type"`
	F       string `json:"f"`
	Time    int64  `json:"time"`
	// Driver, Token, Supervise and Namespace ("" for default) describe
	// the driver an op is about.
	Driver    string `json:"driver,omitempty"`
	Token     string `json:"token,omitempty"`
	Supervise bool   `json:"supervise,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Schedule names the schedule a schedule-run asked.
	Schedule string `json:"schedule,omitempty"`
	// State and Attempt are what a read returned.
	State   string `json:"state,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Fault names a nemesis fault (kill-leader, partition-halves, ...),
	// Targets the nodes it hits, and Window pairs its start and stop.
	Fault   string   `json:"fault,omitempty"`
	Targets []string `json:"targets,omitempty"`
	Window  int      `json:"window,omitempty"`
	// Error is the answer of a failed or indeterminate op.
	Error string `json:"error,omitempty"`
}

// Recorder appends events to a JSON-lines file and keeps them in memory.
// It is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	ops []Op
	err error
}

// Create starts a history at path (truncated if it exists).
func Create(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f, w: bufio.NewWriter(f)}, nil
}

// Add stamps op with the next index and the current time (unless Time is
// set), records it, and returns it.
func (r *Recorder) Add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = len(r.ops)
	if op.Time == 0 {
		op.Time = time.Now().UnixNano()
	}
	r.ops = append(r.ops, op)
	b, err := json.Marshal(op)
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	if err == nil && op.Process == NemesisProcess {
		// Faults are rare and matter most when reading a crashed run.
		err = r.w.Flush()
	}
	if err != nil && r.err == nil {
		r.err = err
	}
	return op
}

// Complete records the completion of invoke with type t: a copy of invoke
// with fill applied (to set the answer's fields).
func (r *Recorder) Complete(invoke Op, t Type, fill func(*Op)) Op {
	op := invoke
	op.Type, op.Time, op.Error = t, 0, ""
	if fill != nil {
		fill(&op)
	}
	return r.Add(op)
}

// Ops returns a copy of the events so far, in order.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Close flushes and closes the file; it returns the first write error.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// Read parses a JSON-lines history.
func Read(rd io.Reader) ([]Op, error) {
	var out []Op
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		out = append(out, op)
	}
	return out, sc.Err()
}

// Window is one fault's span, from a nemesis start to its stop (or to the
// end of the history if it never stopped).
type Window struct {
	ID      int
	Fault   string
	Targets []string
	Start   int64
	Stop    int64
}

// Windows pairs the nemesis start and stop events of ops; end is used for
// a fault that never stopped.
func Windows(ops []Op, end int64) []Window {
	var out []Window
	open := map[int]int{}
	for _, op := range ops {
		if op.Process != NemesisProcess {
			continue
		}
		switch op.F {
		case FStart:
			open[op.Window] = len(out)
			out = append(out, Window{ID: op.Window, Fault: op.Fault, Targets: op.Targets, Start: op.Time, Stop: end})
		case FStop:
			if i, ok := open[op.Window]; ok {
				out[i].Stop = op.Time
				delete(open, op.Window)
			}
		}
	}
	return out
}

// Pairs matches each client invoke with its completion: the next event of
// the same process. An invoke with no completion (the run ended) is paired
// with nil.
func Pairs(ops []Op) [][2]*Op {
	var out [][2]*Op
	pending := map[int]int{}
	for i := range ops {
		op := &ops[i]
		if op.Process == NemesisProcess {
			continue
		}
		if op.Type == Invoke {
			pending[op.Process] = len(out)
			out = append(out, [2]*Op{op, nil})
			continue
		}
		if j, ok := pending[op.Process]; ok {
			out[j][1] = op
			delete(pending, op.Process)
		}
	}
	return out
}
