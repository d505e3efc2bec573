// Package unitdir is the contract between the worker daemon and the
// `drover runner` process it starts for each driver attempt or executor
// (a "unit"): the files they exchange through the unit's directory and
// the work dir, and the names they agree on. The worker writes the spec
// (SpecFile), the resources file and the stop request (StopFile), and
// renews the lease file (LeaseContent); the runner writes its status
// (StatusFile), its event lines on stdout (Event) and the program's
// rotated logs (LogFileName), which the worker reads back, serves and
// adopts after a restart. Both sides link this package and nothing of
// each other, so the worker does not link the runner's supervisor
// (package artifact, isolation, the client), and the formats live in one
// place.
//
// The formats are read across versions: a worker reads the files of a
// runner an older or newer worker started, and a runner follows the lease
// file of a newer worker (a rolling upgrade). Fields are only added, each
// optional; a reader never depends on one it may not find.
package unitdir

import (
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/drover-project/drover/internal/atomicfile"
)

// CgroupName is the name of a unit's cgroup under its worker's: the
// unit's ID (a driver or app ID, which package ids keeps to letters,
// digits and dashes) and its number (attempt or executor ID),
// "driver-20240102030405-0001-2" or "app-20240102030405-0001-0".
func CgroupName(id string, n int) string { return fmt.Sprintf("%s-%d", id, n) }

// WorkerCgroupName is the name of a worker's cgroup under drover/: the
// worker's ID and the first 8 characters of its work dir's instance ID,
// so that two work dirs of one worker ID never share one.
func WorkerCgroupName(workerID, instance string) string {
	if len(instance) > 8 {
		instance = instance[:8]
	}
	return workerID + "-" + instance
}

// private is the mode of the unit directory's files that only their
// owner reads: the spec, the status, the stop file and the logs.
const private fs.FileMode = 0o600

// writeFileAtomic replaces dir/name with b, of the given mode, so that a
// reader sees either the old or the new content, never a torn write, even
// across a crash.
func writeFileAtomic(dir, name string, b []byte, mode fs.FileMode) error {
	return atomicfile.Replace(filepath.Join(dir, name), b, mode, true)
}
