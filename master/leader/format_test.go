package leader

import (
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/transport/gossip"
)

// Entries are in MessagePack only when every other voter answers the
// leader's heartbeats and every voter is in the pool saying it reads
// them; a voter the heartbeats miss, one missing from the pool, one of a
// version without the field, one that is a worker's name, or no
// configuration at all keeps them in JSON.
func TestEntryFormatWaitsForEveryVoter(t *testing.T) {
	pool := map[string]gossip.Meta{
		"master/m1": {Role: gossip.RoleMaster, ID: "m1", LogFormat: fsm.FormatPack},
		"master/m2": {Role: gossip.RoleMaster, ID: "m2", LogFormat: fsm.FormatPack},
		"master/m3": {Role: gossip.RoleMaster, ID: "m3"},
		"worker/m4": {Role: gossip.RoleWorker, ID: "m4", LogFormat: fsm.FormatPack},
	}
	lookup := func(role, id string) (gossip.Meta, bool) {
		m, ok := pool[gossip.NodeName(role, id)]
		return m, ok
	}
	for _, c := range []struct {
		name            string
		voters, reached []string
		want            byte
	}{
		{"every voter reads MessagePack", []string{"m1", "m2"}, []string{"m2"}, fsm.FormatPack},
		{"alone", []string{"m1"}, nil, fsm.FormatPack},
		{"a voter the heartbeats miss", []string{"m1", "m2"}, nil, fsm.FormatJSON},
		{"a voter of an older version", []string{"m1", "m2", "m3"}, []string{"m2", "m3"}, fsm.FormatJSON},
		{"a voter missing from the pool", []string{"m1", "m2", "m5"}, []string{"m2", "m5"}, fsm.FormatJSON},
		{"a worker of a voter's name", []string{"m1", "m4"}, []string{"m4"}, fsm.FormatJSON},
		{"no configuration", nil, nil, fsm.FormatJSON},
	} {
		if got := entryFormat(c.voters, c.reached, lookup); got != c.want {
			t.Errorf("%s: format %d, want %d", c.name, got, c.want)
		}
	}
}
