package leader

import (
	"context"
	"slices"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/transport/gossip"
)

// Format returns the format of the Raft entries this term writes:
// fsm.FormatPack once every other voter of the Raft configuration answers
// the leader's Raft heartbeats and is in its gossip pool saying it reads
// that format (gossip.Meta.LogFormat), and fsm.FormatJSON, which every
// master reads, before that and while a voter is down or older (a rolling
// upgrade, a master restarting, perhaps with another release). A master
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
		f := entryFormat(t.d.Configuration(), t.d.Voters(), t.d.Pool.Lookup)
		t.format.Store(uint32(f))
		if f != last {
			if f == fsm.FormatPack {
				t.d.Log.Info("Raft entries now in MessagePack: every voter is up and reads them")
			} else {
				t.d.Log.Info("Raft entries in JSON again: a voter is down or does not read MessagePack")
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
// pool (lookup, gossip.Pool.Lookup) with a LogFormat that reads it and all
// but one (this master) are among reached, the others the leader's Raft
// heartbeats reach; fsm.FormatJSON otherwise, or when voters is empty
// (Raft could not say). The pool alone would take a master killed a
// moment ago for one that is up until gossip finds it gone, seconds
// later, time enough for it to restart with an older release.
func entryFormat(voters, reached []string, lookup func(role, id string) (gossip.Meta, bool)) byte {
	if len(voters) == 0 {
		return fsm.FormatJSON
	}
	unreached := 0
	for _, id := range voters {
		if !slices.Contains(reached, id) {
			unreached++
		}
	}
	if unreached > 1 {
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
