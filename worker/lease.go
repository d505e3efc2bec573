package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// LeaseFile is the name, in the work dir, of the file whose renewals tell
// the runners that their worker lives (see Config.Lease and
// runner.Spec.LeaseFile).
const LeaseFile = "worker.lease"

// leaseContent is what the worker writes in LeaseFile. The runners only
// look for renewals and never parse it; the next worker on the work dir reads
// LeaderContact to fence its adopted attempts from the previous worker's
// last contact rather than its own start.
type leaseContent struct {
	// Renewed is when the worker wrote the file, Unix milliseconds.
	Renewed int64 `json:"renewed_ms"`
	// LeaderContact is lastContact in Unix milliseconds, absent when no
	// leader has answered yet.
	LeaderContact int64 `json:"leader_contact_ms,omitempty"`
}

// leasePoll is how often a strict worker checks its contact with a leader,
// as often as a runner checks its lease.
func leasePoll(lease time.Duration) time.Duration {
	return max(min(lease/10, 100*time.Millisecond), time.Millisecond)
}

// renewLease rewrites LeaseFile with the current time and last leader
// contact. When the rewrite fails (a full disk) it touches the file instead:
// a touch needs no space, and a full disk must not end every program.
func (w *Worker) renewLease() error {
	now := time.Now()
	w.mu.Lock()
	contact := w.lastContact
	w.mu.Unlock()
	c := leaseContent{Renewed: now.UnixMilli()}
	if !contact.IsZero() {
		c.LeaderContact = contact.UnixMilli()
	}
	b, err := json.Marshal(c)
	if err == nil {
		err = replaceFile(w.leasePath, b)
	}
	if err != nil {
		if terr := os.Chtimes(w.leasePath, now, now); terr != nil {
			return err
		}
		w.log.Warn("cannot rewrite the lease file; touched it instead", "err", err)
	}
	return nil
}

// replaceFile replaces path with b atomically, so a reader never sees a
// partial file. It does not sync: the lease only matters while this machine
// runs, and a sync every Lease/4 would cost more than it protects.
func replaceFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// previousContact returns, on the monotonic clock of now, when the leader
// last answered the worker that wrote the lease file at path: the zero time
// when there is no file or it names no contact. A contact "in the future"
// (the wall clock stepped back) counts as now.
func previousContact(path string, now time.Time) time.Time {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}
	}
	var c leaseContent
	if json.Unmarshal(b, &c) != nil || c.LeaderContact <= 0 {
		return time.Time{}
	}
	age := max(now.UnixMilli()-c.LeaderContact, 0)
	return now.Add(-time.Duration(age) * time.Millisecond)
}
