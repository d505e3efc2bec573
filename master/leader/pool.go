package leader

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/model"
)

// Split returns the members the leader hears from but does not see in its
// gossip pool (a split pool), sorted by role and ID, with since when.
func (t *Term) Split() []api.PoolMember {
	if p := t.split.Load(); p != nil {
		return *p
	}
	return nil
}

// splitState holds the last report, for comparing.
type splitState = atomic.Pointer[[]api.PoolMember]

// watchPool reports a split gossip pool: voters in the Raft configuration
// and workers that heartbeat within the worker timeout, whom the leader does
// not see in its pool. Such a worker cannot be watched through gossip and
// such a master cannot find the leader's address; nothing else would say
// so. It logs once per change of the set.
func (t *Term) watchPool(ctx context.Context) {
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	since := map[string]time.Time{}
	last := ""
	for {
		changed := t.d.GossipChanged()
		var now []api.PoolMember
		at := time.Now()
		missing := func(role, id string) {
			if _, ok := t.d.Pool.Lookup(role, id); ok {
				delete(since, role+"/"+id)
				return
			}
			key := role + "/" + id
			if _, ok := since[key]; !ok {
				since[key] = at
			}
			now = append(now, api.PoolMember{Role: role, ID: id, Since: since[key].UnixMilli()})
		}
		for _, id := range t.d.Voters() {
			missing(gossip.RoleMaster, id)
		}
		for _, w := range t.d.FSM.Workers() {
			if w.State == model.WorkerDead || at.Sub(t.Workers.Get(w.ID)) > t.cfg.WorkerTimeout {
				continue
			}
			missing(gossip.RoleWorker, w.ID)
		}
		slices.SortFunc(now, func(a, b api.PoolMember) int { return strings.Compare(a.Role+"/"+a.ID, b.Role+"/"+b.ID) })
		t.split.Store(&now)
		if names := poolNames(now); names != last {
			if names == "" {
				t.d.Log.Info("gossip pool whole again: the leader sees every voter and heartbeating worker")
			} else {
				t.d.Log.Warn("gossip pool split: the leader hears from members it does not see in its gossip pool; check the gossip ports, addresses and keys",
					"missing", names)
			}
			last = names
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

func poolNames(ms []api.PoolMember) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Role + "/" + m.ID
	}
	return strings.Join(names, ", ")
}
