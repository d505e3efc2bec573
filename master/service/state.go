package service

import (
	"context"
	"fmt"
	"strconv"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport/gossip"
)

// State serves V1State: this master's own view, whatever its role, so
// that a test or an operator can compare the masters' tables
// (api.State.StateHash). A namespace token sees the drivers and apps of
// its namespaces only (scopeState); the hash stays the whole tables'.
func (s *Core) State(_ context.Context, c auth.Caller) (api.State, error) {
	l := s.Leadership()
	st := api.State{
		ID:             s.cfg.ID,
		Role:           l.Role,
		Leader:         l.LeaderID,
		LeaderHTTP:     l.LeaderHTTP,
		CommitIndex:    s.Raft.CommitIndex(),
		AppliedIndex:   s.Raft.AppliedIndex(),
		Workers:        s.FSM.State().Workers(),
		Drivers:        s.FSM.State().Drivers(),
		WaitingDrivers: []string{},
		Apps:           s.appStatuses(),
	}
	st.Term, _ = strconv.ParseUint(s.Raft.Stats()["term"], 10, 64)
	for _, d := range s.FSM.State().WaitingDrivers() {
		st.WaitingDrivers = append(st.WaitingDrivers, d.ID)
	}
	if peers, err := s.peers(); err == nil {
		st.Masters = peers.Peers
	}
	st.StateHash, st.StateIndex, _ = s.FSM.HashAt()
	st.Blobs.Files, st.Blobs.Bytes = s.Blobs.Usage()
	if t := s.term.Load(); t != nil {
		st.PoolSplit, st.LeadingSince = t.Split(), t.Since.UnixMilli()
	}
	scopeState(c, &st)
	return st, nil
}

// appStatuses returns every app with its executors, waiting ones explained:
// the State's apps, and what Applications.Apps answers.
func (s *Core) appStatuses() []api.AppStatus {
	out, _ := atOneIndex(s.FSM, func() ([]api.AppStatus, error) {
		apps, execs := s.FSM.State().Apps()
		ws := s.FSM.State().Workers()
		out := make([]api.AppStatus, len(apps))
		tn := newTenants(s.FSM.State(), ws, s.cfg.MaxRunningDrivers)
		for i, a := range apps {
			out[i] = explainApp(api.AppStatus{App: a, Executors: execs[i]}, ws, tn)
		}
		return out, nil
	})
	return out
}

// peers is the Raft configuration with each master's HTTP address, as it
// gave it on its Raft port (Deps.MasterHTTP), the leader marked, and
// those this master sees in its gossip pool alive: the
// State's masters, and what Operator's reads and membership changes
// answer with.
func (s *Core) peers() (api.RaftPeers, error) {
	cf := s.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return api.RaftPeers{}, fmt.Errorf("%w: raft configuration: %v", api.ErrUnavailable, err)
	}
	_, leaderID := s.Raft.LeaderWithID()
	alive := map[string]bool{s.cfg.ID: true}
	for _, m := range s.Pool.Members() {
		if m.Role == gossip.RoleMaster {
			alive[m.ID] = true
		}
	}
	out := api.RaftPeers{Index: cf.Index(), Peers: []api.Master{}}
	for _, srv := range cf.Configuration().Servers {
		ms := api.Master{ID: string(srv.ID), RaftAddr: string(srv.Address), Suffrage: srv.Suffrage.String(), Leader: srv.ID == leaderID,
			Alive: alive[string(srv.ID)]}
		if string(srv.ID) == s.cfg.ID {
			ms.HTTPAddr = s.cfg.HTTPAddr
		} else {
			ms.HTTPAddr = s.MasterHTTP(string(srv.ID), string(srv.Address))
		}
		out.Peers = append(out.Peers, ms)
	}
	return out, nil
}
