package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport/gossip"
)

// GossipPeers serves V1GossipPeers: this master's own address, then
// every other master it sees in its pool or learned from its Raft peers.
func (s *Core) GossipPeers(context.Context, auth.Caller) (api.GossipPeers, error) {
	byID := map[string]string{}
	for id, addr := range s.KnownMasters() {
		byID[id] = addr
	}
	for _, m := range s.Pool.Members() {
		if m.Role == gossip.RoleMaster {
			byID[m.ID] = m.Addr
		}
	}
	delete(byID, s.cfg.ID)
	out := api.GossipPeers{Masters: []api.PoolMember{{Role: gossip.RoleMaster, ID: s.cfg.ID, Gossip: s.cfg.GossipAddr}}}
	for _, id := range sortedKeys(byID) {
		out.Masters = append(out.Masters, api.PoolMember{Role: gossip.RoleMaster, ID: id, Gossip: byID[id]})
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// poolView says which masters this master sees in its gossip pool, for
// the error a worker that the leader cannot see gets.
func (s *Core) poolView() string {
	var ms []string
	for _, m := range s.Pool.Members() {
		if m.Role == gossip.RoleMaster {
			ms = append(ms, m.ID)
		}
	}
	slices.Sort(ms)
	return fmt.Sprintf("%d members, masters %s", len(s.Pool.Members()), strings.Join(ms, ","))
}

// quorumSilence is how long a follower may go without hearing from the
// leader before its health says it lost the quorum: two election
// timeouts, past which Raft would have held an election.
func (c Config) quorumSilence() time.Duration { return 2 * c.ElectionTimeout }

// leaderSilence is how long a follower's leader may go without a word
// (Raft's last contact: an AppendEntries or a heartbeat, which a leader
// sends every tenth to fifth of the heartbeat timeout) before health
// counts it gone: three quarters of the heartbeat timeout, so at least
// three heartbeats missed, and before Raft itself gives up on it (at its
// first timer tick a whole timeout past the last contact, up to three
// timeouts), while Raft still names the dead leader. The gossip pool's
// verdict on the leader comes later (its suspicion takes seconds on a
// LAN) and a leader missing from the pool still answers forwarded
// requests, so it is the pool check's, not this one's. 0 when Raft's
// heartbeat timeout is not configured: no silence counts.
func (c Config) leaderSilence() time.Duration { return c.HeartbeatTimeout * 3 / 4 }

// Health serves V1Health: whether this master sees a live leader, a
// quorum, and in its gossip pool the members it hears from.
func (s *Core) Health(context.Context) api.Health {
	h := api.Health{ID: s.cfg.ID, Status: "ok"}
	check := func(name string, ok bool, msg string) {
		h.Checks = append(h.Checks, api.Check{Name: name, OK: ok, Message: msg})
		if !ok {
			h.Status = "degraded"
		}
	}
	l := s.Leadership()
	h.Leader = l.LeaderID
	quiet := time.Since(s.Raft.LastContact())
	switch {
	case l.LeaderID == "":
		check(api.CheckLeader, false, "no leader known")
	case l.LeaderID == s.cfg.ID && !l.Ready:
		check(api.CheckLeader, false, "this master was just elected and is catching up")
	case l.LeaderID != s.cfg.ID && s.cfg.leaderSilence() > 0 && quiet > s.cfg.leaderSilence():
		check(api.CheckLeader, false, fmt.Sprintf("leader %s last spoke %s ago, past %s: it may be gone, and no other leader is known yet",
			l.LeaderID, quiet.Round(time.Millisecond), s.cfg.leaderSilence()))
	default:
		check(api.CheckLeader, true, "leader "+l.LeaderID)
	}
	if s.Raft.State() == raft.Leader {
		if err := s.Raft.VerifyLeader().Error(); err != nil {
			check(api.CheckQuorum, false, fmt.Sprintf("a quorum does not confirm this leader: %v", err))
		} else {
			check(api.CheckQuorum, true, "a quorum follows this leader")
		}
	} else {
		ok := !s.Raft.LastContact().IsZero() && quiet < s.cfg.quorumSilence()
		check(api.CheckQuorum, ok, fmt.Sprintf("the leader last spoke %s ago", quiet.Round(time.Millisecond)))
	}
	// The pool is split when a member this master hears from is missing
	// from its pool: for the leader, what its split report names (voters
	// its heartbeats reach, workers that heartbeat); for a follower, the
	// leader. A voter that is down is heard from by nobody: the quorum
	// check covers the cluster's loss of it, and every master's health
	// failing at once would take a load balancer's whole pool down.
	switch {
	case s.Raft.State() == raft.Leader:
		if split := s.Split(); len(split) > 0 {
			check(api.CheckPool, false, "members the leader hears from but does not see in its gossip pool: "+leader.PoolNames(split))
		} else {
			check(api.CheckPool, true, "the leader sees every voter it reaches and every heartbeating worker in its gossip pool")
		}
	case l.LeaderID == "":
		check(api.CheckPool, true, "no leader to look for in the gossip pool")
	default:
		if _, ok := s.Pool.LookupAt(gossip.RoleMaster, l.LeaderID, l.LeaderHTTP); !ok || l.LeaderHTTP == "" {
			check(api.CheckPool, false, "the leader, "+l.LeaderID+", is missing from this master's gossip pool")
		} else {
			check(api.CheckPool, true, "the leader is in this master's gossip pool")
		}
	}
	return h
}
