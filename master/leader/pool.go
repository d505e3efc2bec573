package leader

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport/gossip"
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

// A member enters the split report once it has been missing from the pool
// for splitGrace, and leaves it once seen again for splitHeal, keeping the
// time it first went missing. The grace covers the start of a term, before
// a dead voter's first failed heartbeat and before a new worker's gossip
// news arrives; the heal covers a member whose gossip works one way only,
// which rejoins at each push-pull and is declared dead again a few seconds
// later: without it the report, the metric and its since would flap, and an
// alert on "split for a minute" would never fire.
const (
	splitGrace = 3 * time.Second
	splitHeal  = time.Minute
)

// outsiderWindow is how long a worker refused registration for not being
// in the pool stays heard from: longer than the pause between its tries,
// each of which waits for it in the pool first.
const outsiderWindow = 30 * time.Second

// watchPool reports a split gossip pool: voters in the Raft configuration
// that the leader's heartbeats reach, workers that heartbeat within the
// worker timeout and workers refused registration within outsiderWindow,
// whom the leader does not see in its
// pool. Such a worker
// cannot be watched through gossip and such a master cannot find the
// leader's address; nothing else would say so. It logs once per change of
// the set.
func (t *Term) watchPool(ctx context.Context) {
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	track := splitTracker{missing: map[string]time.Time{}, seen: map[string]time.Time{}}
	last := ""
	for {
		changed := t.d.GossipChanged()
		at := time.Now()
		var heard []api.PoolMember
		for _, id := range t.d.Voters() {
			heard = append(heard, api.PoolMember{Role: gossip.RoleMaster, ID: id})
		}
		for _, w := range t.d.FSM.State().Workers() {
			if w.State == model.WorkerDead || at.Sub(t.Workers.Get(w.ID)) > t.cfg.WorkerTimeout {
				continue
			}
			heard = append(heard, api.PoolMember{Role: gossip.RoleWorker, ID: w.ID})
		}
		for _, id := range t.Outsiders.Recent(at.Add(-outsiderWindow)) {
			if !slices.ContainsFunc(heard, func(m api.PoolMember) bool { return m.Role == gossip.RoleWorker && m.ID == id }) {
				heard = append(heard, api.PoolMember{Role: gossip.RoleWorker, ID: id})
			}
		}
		now := track.update(at, heard, func(m api.PoolMember) bool {
			_, ok := t.d.Pool.Lookup(m.Role, m.ID)
			return ok
		})
		t.split.Store(&now)
		if names := PoolNames(now); names != last {
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

// splitTracker applies splitGrace and splitHeal. missing holds when each
// member heard from was first found missing from the pool, seen when a
// missing one was found in it again.
type splitTracker struct {
	missing, seen map[string]time.Time
}

// update takes the members heard from at time at and whether the pool
// has each, and returns the split report, sorted by role and ID. A member
// no longer heard from (a voter removed or unreachable, a worker silent or
// lost) leaves the report at once.
func (s *splitTracker) update(at time.Time, heard []api.PoolMember, inPool func(api.PoolMember) bool) []api.PoolMember {
	var out []api.PoolMember
	keep := map[string]bool{}
	for _, m := range heard {
		key := m.Role + "/" + m.ID
		keep[key] = true
		since, missing := s.missing[key]
		switch {
		case !inPool(m):
			delete(s.seen, key)
			if !missing {
				since = at
				s.missing[key] = at
			}
		case !missing:
			continue
		default:
			if _, ok := s.seen[key]; !ok {
				s.seen[key] = at
			}
			if at.Sub(s.seen[key]) >= splitHeal || at.Sub(since) < splitGrace {
				delete(s.missing, key)
				delete(s.seen, key)
				continue
			}
		}
		if at.Sub(since) >= splitGrace {
			m.Since = since.UnixMilli()
			out = append(out, m)
		}
	}
	for key := range s.missing {
		if !keep[key] {
			delete(s.missing, key)
			delete(s.seen, key)
		}
	}
	slices.SortFunc(out, func(a, b api.PoolMember) int { return strings.Compare(a.Role+"/"+a.ID, b.Role+"/"+b.ID) })
	return out
}

// PoolNames lists members as role/ID, comma-separated: "master/m3, worker/w9".
func PoolNames(ms []api.PoolMember) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Role + "/" + m.ID
	}
	return strings.Join(names, ", ")
}
