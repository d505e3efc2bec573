package events

import (
	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// Size estimates, in bytes, what event e keeps alive: a fixed part for
// the event and its row's fixed fields, and what can grow with what a
// client or a worker sent: the program of a driver or an app (argv,
// environment, artifacts), names and messages, a driver's attempt records
// and the custom resources of a row. A program that rows share, with
// each other or with the table, is counted in full for each event that
// holds it, so the bytes of a Buffer bound from above what its events keep
// alive that the tables no longer hold. It walks the row once and
// allocates nothing.
func Size(e api.Event) int64 {
	n := eventBytes + len(e.ID)
	switch {
	case e.Driver != nil:
		d := e.Driver
		n += rowBytes + len(d.Name) + len(d.Token) + len(d.Message) +
			stringsSize(d.Argv) + envSize(d.Env) + artifactsSize(d.Artifacts) + len(d.Resources)*entryBytes
		for _, a := range d.Attempts {
			n += attemptBytes + len(a.Reason) + resourcesSize(a.Resources) + 8*len(a.Failures)
		}
	case e.App != nil:
		a := e.App
		n += rowBytes + len(a.Name) + len(a.Token) + len(a.Message) + len(a.DriverID) +
			stringsSize(a.Argv) + envSize(a.Env) + artifactsSize(a.Artifacts) + len(a.ResourcesPerExecutor)*entryBytes
	case e.Executor != nil:
		n += rowBytes + len(e.Executor.Message) + resourcesSize(e.Executor.Resources)
	case e.Worker != nil:
		w := e.Worker
		n += rowBytes + len(w.Instance) + len(w.HTTPAddr) + len(w.Message) + resourcesSize(w.Resources) + resourcesSize(w.ResourcesUsed)
	}
	return int64(n)
}

// The fixed parts of Size: an event (api.Event and its place in a batch),
// a row's fixed fields, an attempt record's, and an entry of a slice or a
// map beside its strings' bytes. Rough, on the side of more.
const (
	eventBytes   = 128
	rowBytes     = 384
	attemptBytes = 160
	entryBytes   = 32
)

func stringsSize(ss []string) int {
	n := 0
	for _, s := range ss {
		n += entryBytes + len(s)
	}
	return n
}

func envSize(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += entryBytes + len(k) + len(v)
	}
	return n
}

func artifactsSize(as []model.Artifact) int {
	n := 0
	for _, a := range as {
		n += rowBytes/2 + len(a.Source) + len(a.URL) + len(a.Upload) + len(a.SHA256) + len(a.Archive) + len(a.Name) + len(a.Dest)
	}
	return n
}

func resourcesSize(rs model.Resources) int {
	n := 0
	for name, addrs := range rs {
		n += entryBytes + len(name) + stringsSize(addrs)
	}
	return n
}
