package events

import (
	"github.com/drover-project/drover/model"
)

// Size estimates, in bytes, what event e keeps alive: a fixed part for
// the event and its row's fixed fields, and what can grow with what a
// client or a worker sent: the program of a driver or an app (its
// ProgramSize, and an entry for each argument, variable, artifact and
// resource), tokens and messages, a driver's attempt records and the
// custom resources of a row. A program that rows share, with each other or
// with the table, is counted in full for each event that holds it, so the
// bytes of a Buffer bound from above what its events keep alive that the
// tables no longer hold. It walks the row once and allocates nothing.
func Size(e model.Event) int64 {
	n := eventBytes + len(e.ID)
	switch {
	case e.Driver != nil:
		d := e.Driver
		n += rowBytes + d.ProgramSize() + len(d.Token) + len(d.Message) +
			entryBytes*(len(d.Argv)+len(d.Env)+len(d.Resources)) + artifactBytes*len(d.Artifacts)
		for _, a := range d.Attempts {
			n += attemptBytes + len(a.Reason) + resourcesSize(a.Resources) + 8*len(a.Failures)
		}
	case e.App != nil:
		a := e.App
		n += rowBytes + a.ProgramSize() + len(a.Token) + len(a.Message) + len(a.DriverID) +
			entryBytes*(len(a.Argv)+len(a.Env)+len(a.ResourcesPerExecutor)) + artifactBytes*len(a.Artifacts)
	case e.Executor != nil:
		n += rowBytes + len(e.Executor.Message) + resourcesSize(e.Executor.Resources)
	case e.Worker != nil:
		w := e.Worker
		n += rowBytes + len(w.HTTPAddr) + len(w.Message) + resourcesSize(w.Resources) + resourcesSize(w.ResourcesUsed)
	}
	return int64(n)
}

// The fixed parts of Size: an event (model.Event and its place in a batch),
// a row's fixed fields, an attempt record's, an artifact's, and an entry
// of a slice or a map beside its strings' bytes. Rough, on the side of
// more.
const (
	eventBytes    = 128
	rowBytes      = 384
	attemptBytes  = 160
	artifactBytes = 128
	entryBytes    = 32
)

// resourcesSize is what the addresses of custom resources hold.
func resourcesSize(rs model.Resources) int {
	n := 0
	for name, addrs := range rs {
		n += entryBytes + len(name)
		for _, a := range addrs {
			n += entryBytes + len(a)
		}
	}
	return n
}
