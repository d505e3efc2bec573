package worker

import (
	"encoding/json"
	"log/slog"
	"time"
)

// Isolation is what the worker needs of cgroups (package isolation, which
// package host adapts; cmd/drover passes host.Isolation): the worker links
// neither, and a nil Isolation runs every unit without a cgroup. A unit's
// cgroup travels as isolation's own JSON (unitdir.Spec's Cgroup), opaque
// to the worker.
type Isolation interface {
	// OpenCgroups makes the worker's cgroup, named name
	// (unitdir.WorkerCgroupName), under which each unit gets its own.
	// Nil Cgroups and no error runs the units without cgroups (the mode
	// allows that and the machine does not allow cgroups; it has said so
	// on log); an error stops New.
	OpenCgroups(name string, log *slog.Logger) (Cgroups, error)
	// DestroyCgroup kills what is left in a unit's cgroup, waiting up to
	// timeout for it to be gone, and removes the cgroup; one already gone
	// is no error. It works without OpenCgroups, so that a worker started
	// without cgroups still removes those an earlier worker made.
	DestroyCgroup(cgroup json.RawMessage, timeout time.Duration) error
	// CgroupPath names a unit's cgroup for the log: its v2 path, or its
	// v1 memory controller's; the JSON as it is when it does not parse.
	CgroupPath(cgroup json.RawMessage) string
}

// Cgroups is the worker's cgroup, as Isolation opened it.
type Cgroups interface {
	// Create makes the cgroup of unit (unitdir.CgroupName) with a memory
	// limit of memoryMB MiB and a CPU quota of cores cores (zero: none),
	// and returns it as a spec carries it.
	Create(unit string, memoryMB int64, cores int) (json.RawMessage, error)
	// Sweep kills and removes the units' cgroups for which keep is
	// false, waiting up to timeout for each, and returns their names.
	Sweep(keep func(unit string) bool, timeout time.Duration) ([]string, error)
	// Remove removes the worker's cgroup; it fails while a unit's is left.
	Remove() error
	// String names the cgroup for the log ("cgroup v2 /drover/w1-...").
	String() string
}
