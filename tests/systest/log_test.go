package systest

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// A master whose log holds a committed entry it cannot decode (one a newer
// version wrote) refuses to go on: drover master exits 1 and says which
// entry stopped it, rather than skip it and hold tables unlike its peers'.
func TestMasterRefusesAnEntryItCannotDecode(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 1})
	m := c.Masters[0]
	submit(t, c, newProbe(t).request("exit 0", false))
	m.Stop(10 * time.Second)

	// Append, in the master's own term, an entry of type 0x7f, which no
	// version knows and whose writer did not flag it ignorable.
	store, last := openLog(t, m)
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	bad := raft.Log{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: []byte{fsm.FormatJSON, 0x7f, '{', '}'}}
	if err := store.StoreLog(&bad); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted alone, it leads, commits the entry with its first one of
	// the new term, and meets it.
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Exited():
	case <-time.After(60 * time.Second):
		t.Fatalf("the master still runs past an entry it cannot decode; log:\n%s", m.Log())
	}
	if code := m.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1; log:\n%s", code, m.Log())
	}
	log := m.Log()
	want := "index " + strconv.FormatUint(bad.Index, 10)
	if !strings.Contains(log, want) || !strings.Contains(log, "0x7f") || !strings.Contains(log, "unknown type") {
		t.Fatalf("the log does not name the entry (%s, type byte 0x7f, unknown type):\n%s", want, log)
	}
}

// Three masters of one release write their log in MessagePack (format 2)
// once the leader sees every voter up and reading it, and every master
// holds the same entries: a submission's entry is format 2 in each
// master's raft.db.
func TestMastersWriteTheirLogInMessagePack(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	leader, err := c.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(leader.Log(), "Raft entries now in MessagePack") {
		if time.Now().After(deadline) {
			t.Fatalf("the leader never wrote MessagePack; its log:\n%s", leader.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	id := submit(t, c, newProbe(t).request("exit 0", false))
	// Every master applies the entry (a quorum held it when the
	// submission was acknowledged) before any stops.
	st, err := testcluster.State(context.Background(), leader)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Masters {
		for {
			s, err := testcluster.State(context.Background(), m)
			if err == nil && s.AppliedIndex >= st.AppliedIndex {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not apply index %d: %v", m.ID, st.AppliedIndex, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, m := range c.Masters {
		m.Stop(10 * time.Second)
		store, last := openLog(t, m)
		format := byte(0)
		for i := last; i > 0 && format == 0; i-- {
			var l raft.Log
			if store.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
				continue
			}
			if _, p, err := fsm.Decode(l.Data); err == nil {
				if s, ok := p.(*model.SubmitDriver); ok && s.ID == id {
					format = l.Data[0]
				}
			}
		}
		store.Close()
		if format != fsm.FormatPack {
			t.Errorf("%s holds the entry of %s in format %d, want %d", m.ID, id, format, fsm.FormatPack)
		}
	}
}

// openLog opens the Raft log of stopped master m and returns it with the
// index of its last entry.
func openLog(t *testing.T, m *testcluster.Node) (*raftboltdb.BoltStore, uint64) {
	t.Helper()
	store, err := raftboltdb.NewBoltStore(filepath.Join(m.Dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return store, last
}
