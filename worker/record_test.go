package worker

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// TestRecordFormat: a driver attempt's record is what workers wrote before
// executors, so each reads the other's; an executor's names its kind; a
// kind this worker does not know is refused rather than taken for an
// attempt.
func TestRecordFormat(t *testing.T) {
	const old = `{"driver_id":"driver-20260101000000-1","attempt":2,"dir":"/w/driver-20260101000000-1/attempt-2","runner_pid":7,"runner_start":9}`
	var r record
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	want := attemptKey("driver-20260101000000-1", 2)
	if k, ok := r.key(); !ok || k != want {
		t.Fatalf("old record's key = %+v, %v; want %+v", k, ok, want)
	}
	if b, _ := json.Marshal(newRecord(want, r.Dir, 7, 9)); string(b) != old {
		t.Fatalf("attempt record = %s, want the old format %s", b, old)
	}

	st, err := openStore(filepath.Join(t.TempDir(), DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	keys := []unitKey{want, executorKey("app-20260101000000-1", 0), executorKey("app-20260101000000-1", 2)}
	for _, k := range keys {
		if err := st.put(newRecord(k, k.dir("/w"), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.put(record{Kind: "something newer", Dir: "/w/x"}); err == nil {
		t.Fatal("a record of an unknown kind was written")
	}
	recs, err := st.all()
	if err != nil {
		t.Fatal(err)
	}
	got := map[unitKey]string{}
	for _, rec := range recs {
		k, ok := rec.key()
		if !ok {
			t.Fatalf("record %+v of unknown kind", rec)
		}
		got[k] = rec.Dir
	}
	for _, k := range keys {
		if got[k] != k.dir("/w") {
			t.Fatalf("records %v, want %v each in its own directory", got, keys)
		}
	}
	if got[keys[1]] != "/w/app-20260101000000-1/0" {
		t.Fatalf("executor 0's directory = %s", got[keys[1]])
	}
	if _, ok := (record{Kind: "something newer"}).key(); ok {
		t.Fatal("a record of an unknown kind was taken for a known one")
	}
	if err := st.remove(keys); err != nil {
		t.Fatal(err)
	}
	if recs, _ := st.all(); len(recs) != 0 {
		t.Fatalf("records left after remove: %+v", recs)
	}
}

// TestTombstones: a tombstone is found by its unit, of either kind; prune
// drops those made before its cutoff, keeps the younger ones, and leaves
// the records alone.
func TestTombstones(t *testing.T) {
	st, err := openStore(filepath.Join(t.TempDir(), DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	oldK, newK := attemptKey("driver-20260101000000-1", 1), executorKey("app-20260101000000-1", 0)
	live := attemptKey("driver-20260101000000-1", 2)
	if err := st.put(newRecord(live, live.dir("/w"), 1, 1)); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for k, at := range map[unitKey]time.Time{oldK: now.Add(-2 * tombstoneTTL), newK: now} {
		if err := st.bury(k, tombstone{At: at.Unix(), Reason: reasonLowDisk}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := st.tombstone(live); ok {
		t.Fatal("a unit nobody buried has a tombstone")
	}
	if tb, ok := st.tombstone(newK); !ok || tb.Reason != reasonLowDisk || tb.At != now.Unix() {
		t.Fatalf("tombstone = %+v, %v", tb, ok)
	}
	if err := st.prune(now.Add(-tombstoneTTL)); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.tombstone(oldK); ok {
		t.Fatal("an old tombstone outlived the prune")
	}
	if _, ok := st.tombstone(newK); !ok {
		t.Fatal("a young tombstone was pruned")
	}
	if !st.has(live) || st.has(oldK) {
		t.Fatalf("records: live %v, buried %v", st.has(live), st.has(oldK))
	}
}
