package fsm

import (
	"iter"
	"slices"

	"github.com/drover-project/drover/model"
)

// liveRows is what has not ended, kept as Apply changes the rows so that
// the leader's bounds on it (a master's --max-live-drivers, its per-client
// twin and --max-live-apps) cost a lookup rather than a walk of every
// row. Derived, like the per-worker index: kept by Apply, rebuilt on
// Restore, not in snapshots or the state hash. Every master keeps the
// same, since it follows from the rows alone, so a new leader bounds
// from where the old one stopped.
type liveRows struct {
	// drivers holds each driver not in a final state, with the client it
	// was submitted from ("" for none: entries written before
	// SubmitDriver.Client existed).
	drivers map[string]string
	// byClient counts drivers by client, "" left out.
	byClient map[string]int
	// apps holds each app not in a final state.
	apps map[string]struct{}
}

func newLiveRows() liveRows {
	return liveRows{drivers: map[string]string{}, byClient: map[string]int{}, apps: map[string]struct{}{}}
}

// driver records whether driver id, submitted from client, is live now.
func (l *liveRows) driver(id, client string, live bool) {
	was, ok := l.drivers[id]
	switch {
	case live && !ok:
		l.drivers[id] = client
		if client != "" {
			l.byClient[client]++
		}
	case !live && ok:
		delete(l.drivers, id)
		if was != "" {
			if l.byClient[was]--; l.byClient[was] == 0 {
				delete(l.byClient, was)
			}
		}
	}
}

// app records whether app id is live now.
func (l *liveRows) app(id string, live bool) {
	if live {
		l.apps[id] = struct{}{}
	} else {
		delete(l.apps, id)
	}
}

// recount brings t.live, and the order of driver IDs, up to date with the
// driver and app rows the entry being applied touched (every change of a
// row is recorded there, for its event), before publish clears them.
// Called with f.mu held.
func (f *FSM) recount() {
	for k := range f.touched {
		f.t.charge(k)
		switch k.kind {
		case model.EventDriver:
			d, ok := f.t.Drivers[k.id]
			client := ""
			if ok {
				client = d.Client
			}
			f.t.live.driver(k.id, client, ok && !d.State.Terminal())
			f.t.orderDriver(k.id, ok)
		case model.EventApp:
			a, ok := f.t.Apps[k.id]
			f.t.live.app(k.id, ok && !a.State.Terminal())
		}
	}
}

// countLive fills in t.live and the order of driver IDs from the rows,
// for tables a snapshot restored.
func (t *tables) countLive() {
	t.live = newLiveRows()
	t.driverIDs = make([]string, 0, len(t.Drivers))
	for id, d := range t.Drivers {
		t.live.driver(id, d.Client, !d.State.Terminal())
		t.driverIDs = append(t.driverIDs, id)
	}
	slices.Sort(t.driverIDs)
	for id, a := range t.Apps {
		t.live.app(id, !a.State.Terminal())
	}
}

// Live is how many rows have not ended, as the leader's bounds count them.
type Live struct {
	// Drivers is the drivers not in a final state (SUBMITTED, RUNNING,
	// RELAUNCHING, UNKNOWN), and ClientDrivers those of them submitted
	// from the client Live was asked about (model.Driver.Client).
	Drivers, ClientDrivers int
	// Apps is the apps not in a final state (WAITING, RUNNING, UNKNOWN).
	Apps int
}

// Live counts what has not ended, the drivers of client apart ("" counts
// none apart): a lookup in counts Apply keeps, whatever the tables hold.
func (s *State) Live(client string) Live { return s.LiveWith(client, nil, nil) }

// LiveWith is Live with what a leader has handed to Raft and not seen
// applied counted too: each submission of submits (its token and client)
// and each app registration of registrations (its token) whose token the
// tables do not hold yet. It reads the tables once for all of it, so that
// an entry that applies meanwhile is counted once, as a row or as in
// flight, never twice and never not at all. It walks what is in flight:
// a leader asks Live first, and LiveWith only when Live with everything
// in flight added reaches a bound.
func (s *State) LiveWith(client string, submits iter.Seq2[string, string], registrations iter.Seq[string]) Live {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := Live{Drivers: len(s.t.live.drivers), Apps: len(s.t.live.apps)}
	if client != "" {
		l.ClientDrivers = s.t.live.byClient[client]
	}
	if submits != nil {
		for token, c := range submits {
			if _, ok := s.t.Tokens[token]; ok {
				continue
			}
			l.Drivers++
			if c == client && client != "" {
				l.ClientDrivers++
			}
		}
	}
	if registrations != nil {
		for token := range registrations {
			if _, ok := s.t.AppTokens[token]; !ok {
				l.Apps++
			}
		}
	}
	return l
}
