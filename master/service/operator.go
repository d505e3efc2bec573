package service

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
)

// Operator is the quorum's operations and snapshots (OperatorService): Raft
// membership, leadership transfer, snapshot archives and clearing finished
// rows, after Consul's operator raft commands on hashicorp/raft's membership
// changes. It embeds its master's one Core, whose tables, term and path to
// Raft it uses.
type Operator struct {
	*Core
}

// configChangeTimeout bounds a membership change, which waits for the new
// configuration to commit, and a snapshot restore.
const configChangeTimeout = 30 * time.Second

// RaftPeers serves V1RaftPeers.
func (s *Operator) RaftPeers(_ context.Context, _ auth.Caller, r Read) (api.RaftPeers, error) {
	if err := s.readable(r); err != nil {
		return api.RaftPeers{}, err
	}
	return s.peers()
}

// AddVoter serves V1AddVoter. Adding a voter again is a no-op.
func (s *Operator) AddVoter(_ context.Context, _ auth.Caller, req api.AddVoterRequest) (api.RaftPeers, error) {
	if _, err := s.leading(); err != nil {
		return api.RaftPeers{}, err
	}
	if err := ids.CheckMaster(req.ID); err != nil {
		return api.RaftPeers{}, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	if _, _, err := net.SplitHostPort(req.Address); err != nil {
		return api.RaftPeers{}, api.Errorf(api.ErrInvalidRequest, "address %q: %v", req.Address, err)
	}
	p, err := s.peers()
	if err != nil {
		return api.RaftPeers{}, err
	}
	for _, m := range p.Peers {
		if m.ID == req.ID && m.RaftAddr == req.Address && m.Suffrage == raft.Voter.String() {
			return p, nil
		}
		if m.ID != req.ID && m.RaftAddr == req.Address {
			return api.RaftPeers{}, api.Errorf(api.ErrConflict, "%s is already the address of master %s", req.Address, m.ID)
		}
	}
	if err := s.Raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.Address), p.Index, configChangeTimeout).Error(); err != nil {
		return api.RaftPeers{}, unavailable(err)
	}
	s.Log.Info("added voter", "id", req.ID, "address", req.Address)
	return s.peers()
}

// RemovePeer serves V1RemovePeer. Removing one that is gone is a
// no-op; the last voter stays. Removing the leader itself makes it step
// down once the change commits; the client then hears from the next
// leader.
func (s *Operator) RemovePeer(_ context.Context, _ auth.Caller, req api.RemovePeerRequest) (api.RaftPeers, error) {
	if _, err := s.leading(); err != nil {
		return api.RaftPeers{}, err
	}
	if err := ids.CheckMaster(req.ID); err != nil {
		return api.RaftPeers{}, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	p, err := s.peers()
	if err != nil {
		return api.RaftPeers{}, err
	}
	found := false
	for _, m := range p.Peers {
		found = found || m.ID == req.ID
	}
	if !found {
		return p, nil
	}
	if len(p.Peers) == 1 {
		return api.RaftPeers{}, api.Errorf(api.ErrConflict, "refusing to remove the last voter")
	}
	if err := s.Raft.RemoveServer(raft.ServerID(req.ID), p.Index, configChangeTimeout).Error(); err != nil {
		return api.RaftPeers{}, unavailable(err)
	}
	s.Log.Info("removed peer", "id", req.ID)
	return s.peers()
}

// TransferLeadership serves V1TransferLeadership. A request whose From is
// no longer the leader, or whose target leads already, was done by its
// twin (the client sends it to every master) or by another: it succeeds
// without a second transfer.
func (s *Operator) TransferLeadership(ctx context.Context, _ auth.Caller, req api.TransferLeadershipRequest) (api.TransferLeadershipResponse, error) {
	if _, err := s.leading(); err != nil {
		return api.TransferLeadershipResponse{}, err
	}
	if (req.From != "" && req.From != s.cfg.ID) || req.ID == s.cfg.ID {
		return api.TransferLeadershipResponse{Leader: s.cfg.ID}, nil
	}
	var f raft.Future
	if req.ID == "" {
		f = s.Raft.LeadershipTransfer()
	} else {
		p, err := s.peers()
		if err != nil {
			return api.TransferLeadershipResponse{}, err
		}
		var target *api.Master
		for i, m := range p.Peers {
			if m.ID == req.ID {
				target = &p.Peers[i]
			}
		}
		switch {
		case target == nil:
			return api.TransferLeadershipResponse{}, api.Errorf(api.ErrNotFound, "master %q is not in the Raft configuration", req.ID)
		case target.Suffrage != raft.Voter.String():
			return api.TransferLeadershipResponse{}, api.Errorf(api.ErrConflict, "master %s is not a voter", req.ID)
		}
		f = s.Raft.LeadershipTransferToServer(raft.ServerID(target.ID), raft.ServerAddress(target.RaftAddr))
	}
	if err := f.Error(); err != nil {
		return api.TransferLeadershipResponse{}, unavailable(err)
	}
	next := s.NextLeader(ctx)
	s.Log.Info("transferred leadership", "to", next)
	return api.TransferLeadershipResponse{Leader: next}, nil
}

// NextLeader waits, up to twice the election timeout, until this master
// hears from a leader other than itself after handing over, and returns its
// ID ("" if none spoke up in time). Raft's transfer completes when the
// target starts its election, before its first heartbeat names it.
func (s *Operator) NextLeader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*s.cfg.ElectionTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, id := s.Raft.LeaderWithID(); id != "" && string(id) != s.cfg.ID {
			return string(id)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-tick.C:
		}
	}
}

// ClearCompleted serves V1ClearCompleted: every finished driver and app
// goes in PruneCompleted entries, the command retention commits for the
// oldest beyond its counts, here with all of them: a command whose meaning
// is exactly this, so nothing new enters the log. A driver or app that
// retention drops meanwhile is skipped by the tables and still listed.
func (s *Operator) ClearCompleted(context.Context, auth.Caller) (api.ClearCompletedResponse, error) {
	if _, err := s.leading(); err != nil {
		return api.ClearCompletedResponse{}, err
	}
	drivers, apps := s.FSM.State().Completed()
	out := api.ClearCompletedResponse{DriverIDs: append([]string{}, drivers...), AppIDs: append([]string{}, apps...)}
	for len(drivers)+len(apps) > 0 {
		nd, na := min(len(drivers), leader.PruneBatch), min(len(apps), leader.PruneBatch)
		c := model.PruneCompleted{DriverIDs: drivers[:nd], AppIDs: apps[:na]}
		if _, err := s.Apply(&c); err != nil {
			return api.ClearCompletedResponse{}, err
		}
		drivers, apps = drivers[nd:], apps[na:]
	}
	if len(out.DriverIDs)+len(out.AppIDs) > 0 {
		s.Log.Info("cleared finished drivers and apps on request", "drivers", len(out.DriverIDs), "apps", len(out.AppIDs))
	}
	return out, nil
}
