package master

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// countingLogs is a log store that counts the reads that reach it.
type countingLogs struct {
	raft.LogStore
	reads int
}

func (c *countingLogs) GetLog(index uint64, l *raft.Log) error {
	c.reads++
	return c.LogStore.GetLog(index, l)
}

// The latest entries, which replication and a follower's apply read back
// as soon as they are stored, come from memory; older ones from the store.
func TestLatestLogEntriesReadFromMemory(t *testing.T) {
	disk := &countingLogs{LogStore: raft.NewInmemStore()}
	logs, err := cachedLogs(disk)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for first := uint64(1); first <= n; first += 10 {
		var batch []*raft.Log
		for i := first; i < first+10; i++ {
			batch = append(batch, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i)})
		}
		if err := logs.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(n - logCacheEntries + 1); i <= n; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil || string(l.Data) != fmt.Sprint("entry ", i) {
			t.Fatalf("entry %d: %q, %v", i, l.Data, err)
		}
	}
	if disk.reads != 0 {
		t.Fatalf("%d reads of the latest %d entries reached the store", disk.reads, logCacheEntries)
	}
	var l raft.Log
	if err := logs.GetLog(1, &l); err != nil || string(l.Data) != "entry 1" || disk.reads != 1 {
		t.Fatalf("entry 1: %q, %v, %d reads of the store", l.Data, err, disk.reads)
	}
}
