package worker

// FuzzWorkerRecord feeds arbitrary bytes to what a restarted worker reads
// back from its work dir before it adopts anything: a record of its bbolt
// database (DBFile) and the lease file's last leader contact. `go test
// ./worker` runs its seeds; `make fuzz-smoke` fuzzes it briefly.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/worker/unitdir"
	"go.etcd.io/bbolt"
)

// FuzzWorkerRecord stores the bytes as a record and as the lease file.
// Whatever the bytes: no panic; a record that reads and names a valid unit
// has a directory inside the work dir and reads back the same once written
// as the worker writes it; the previous contact read from the lease file is
// never after now.
func FuzzWorkerRecord(f *testing.F) {
	for _, k := range []unitKey{attemptKey("driver-20260101000000-0001", 2), executorKey("app-20260101000000-0001", 0)} {
		b, err := json.Marshal(newRecord(k, k.dir("/var/lib/drover-worker"), 4242, 123456))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"kind":"something newer","dir":"/w/x"}`, `{"driver_id":"../../etc","attempt":1,"dir":"/"}`,
		`{"kind":"executor","app_id":"app-20260101000000-1","executor_id":-1,"dir":"/w"}`, `{"renewed_ms":1795000000000,"leader_contact_ms":1795000000000}`,
		`{"renewed_ms":1,"leader_contact_ms":9223372036854775807}`, `{"leader_contact_ms":-5}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	st, err := openStore(filepath.Join(dir, DBFile))
	if err != nil {
		f.Fatal(err)
	}
	st.db.NoSync = true
	f.Cleanup(func() { _ = st.close() })
	lease := filepath.Join(dir, "lease")
	f.Fuzz(func(t *testing.T, data []byte) {
		err := st.db.Update(func(tx *bbolt.Tx) error {
			if err := tx.DeleteBucket(attemptsBucket); err != nil {
				return err
			}
			b, err := tx.CreateBucket(attemptsBucket)
			if err != nil {
				return err
			}
			return b.Put([]byte("raw"), data)
		})
		if err != nil {
			t.Fatal(err)
		}
		if recs, err := st.all(); err == nil {
			if len(recs) != 1 {
				t.Fatalf("one record stored, %d read", len(recs))
			}
			r := recs[0]
			if k, ok := r.key(); ok && k.valid() {
				const root = "/var/lib/drover-worker"
				if d := k.dir(root); !strings.HasPrefix(d, root+"/") || strings.Contains(d, "..") {
					t.Fatalf("valid unit %+v has directory %s, outside %s", k, d, root)
				}
				if err := st.put(r); err != nil {
					t.Fatalf("record %+v reads but does not write: %v", r, err)
				}
				again, err := st.all()
				if err != nil || len(again) != 2 {
					t.Fatalf("records after writing %+v: %+v (%v)", r, again, err)
				}
				if !reflect.DeepEqual(again[0], r) && !reflect.DeepEqual(again[1], r) {
					t.Fatalf("record %+v read back as %+v", r, again)
				}
			}
		}
		if err := os.WriteFile(lease, data, 0o600); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if c := previousContact(unitdir.ReadLease(lease), now); c.After(now) {
			t.Fatalf("lease %q: previous contact %s is after now %s", data, c, now)
		}
	})
}
