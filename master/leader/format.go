package leader

import (
	"context"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/gossip"
)

// Format returns the format of the Raft entries this term writes:
// fsm.FormatPack once every voter of the Raft configuration is in the
// leader's gossip pool saying it reads that format (gossip.Meta.LogFormat),
// and fsm.FormatJSON, which every master reads, before that and while a
// voter is missing or older (a rolling upgrade, a master down). A master
// that cannot read an entry halts at it (package fsm), so a quorum that
// still holds an older master keeps the log in the format it reads, as
// Nomad's leader waits for every server's version before it writes what
// only newer servers know. A master added later, or downgraded, reads the
// log and snapshots written before: it must be of a version that reads
// them (docs/deployment.md).
func (t *Term) Format() byte { return byte(t.format.Load()) }

// watchFormat judges the format of the term's entries (Format) at its
// start, at every change of the gossip pool and every livenessInterval,
// and logs each change.
func (t *Term) watchFormat(ctx context.Context) {
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	last := fsm.FormatJSON
	for {
		changed := t.d.GossipChanged()
		f := entryFormat(t.d.Configuration(), t.d.Pool.Lookup)
		t.format.Store(uint32(f))
		if f != last {
			if f == fsm.FormatPack {
				t.d.Log.Info("Raft entries now in MessagePack: every voter reads them")
			} else {
				t.d.Log.Info("Raft entries in JSON again: a voter is missing from the gossip pool or does not read MessagePack")
			}
			last = f
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// entryFormat is fsm.FormatPack when every one of voters is a master in the
// pool (lookup, gossip.Pool.Lookup) with a LogFormat that reads it, and
// fsm.FormatJSON otherwise, or when voters is empty (Raft could not say).
func entryFormat(voters []string, lookup func(role, id string) (gossip.Meta, bool)) byte {
	if len(voters) == 0 {
		return fsm.FormatJSON
	}
	for _, id := range voters {
		m, ok := lookup(gossip.RoleMaster, id)
		if !ok || m.LogFormat < fsm.FormatPack {
			return fsm.FormatJSON
		}
	}
	return fsm.FormatPack
}
