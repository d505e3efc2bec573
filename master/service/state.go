package service

import (
	"context"
	"strconv"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
)

// State implements Service: this master's own view, whatever its role, so
// that a test or an operator can compare the masters' tables
// (api.State.StateHash).
func (s *Core) State(context.Context, auth.Caller) (api.State, error) {
	l := s.Leadership()
	st := api.State{
		ID:             s.cfg.ID,
		Role:           l.Role,
		Leader:         l.LeaderID,
		LeaderHTTP:     l.LeaderHTTP,
		CommitIndex:    s.Raft.CommitIndex(),
		AppliedIndex:   s.Raft.AppliedIndex(),
		Workers:        s.FSM.Workers(),
		Drivers:        s.FSM.Drivers(),
		WaitingDrivers: []string{},
		Apps:           s.appStatuses(),
	}
	st.Term, _ = strconv.ParseUint(s.Raft.Stats()["term"], 10, 64)
	for _, d := range s.FSM.WaitingDrivers() {
		st.WaitingDrivers = append(st.WaitingDrivers, d.ID)
	}
	if peers, err := s.peers(); err == nil {
		st.Masters = peers.Peers
	}
	st.StateHash, _ = s.FSM.StateHash()
	st.Blobs.Files, st.Blobs.Bytes = s.Blobs.Usage()
	if t := s.term.Load(); t != nil {
		st.PoolSplit, st.LeadingSince = t.Split(), t.Since.UnixMilli()
	}
	return st, nil
}
