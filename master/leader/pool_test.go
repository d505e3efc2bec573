package leader

import (
	"testing"
	"time"

	"github.com/drover-project/drover/api"
)

// The split report waits out splitGrace before naming a member, keeps it,
// with the time it first went missing, through the short returns of a
// member whose gossip works one way only, drops it once seen for splitHeal,
// and drops at once a member no longer heard from.
func TestSplitTrackerGraceAndHeal(t *testing.T) {
	s := splitTracker{missing: map[string]time.Time{}, seen: map[string]time.Time{}}
	t0 := time.Unix(1000, 0)
	w := api.PoolMember{Role: "worker", ID: "w1"}
	m := api.PoolMember{Role: "master", ID: "m2"}
	in := map[string]bool{}
	step := func(d time.Duration, heard ...api.PoolMember) []string {
		var names []string
		for _, p := range s.update(t0.Add(d), heard, func(p api.PoolMember) bool { return in[p.ID] }) {
			if p.Since != t0.UnixMilli() {
				t.Fatalf("at %s %s since %d, want the first miss %d", d, p.ID, p.Since, t0.UnixMilli())
			}
			names = append(names, p.ID)
		}
		return names
	}
	expect := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) || (len(got) > 1 && got[1] != want[1]) {
			t.Fatalf("report %v, want %v", got, want)
		}
	}
	expect(step(0, w, m))
	expect(step(splitGrace-time.Millisecond, w, m))
	expect(step(splitGrace, w, m), "m2", "w1")
	// w1 rejoins for a push-pull, then is gone again: still reported.
	in["w1"] = true
	expect(step(10*time.Second, w, m), "m2", "w1")
	in["w1"] = false
	expect(step(12*time.Second, w, m), "m2", "w1")
	// m2 is no longer heard from (down, or its heartbeats fail).
	expect(step(13*time.Second, w), "w1")
	in["w1"] = true
	expect(step(14*time.Second, w), "w1")
	expect(step(14*time.Second+splitHeal-time.Millisecond, w), "w1")
	expect(step(14*time.Second+splitHeal, w))
	// A member missing only briefly is never reported.
	in["w1"] = false
	expect(step(2*splitHeal, w))
	in["w1"] = true
	expect(step(2*splitHeal+time.Second, w))
	in["w1"] = false
	expect(step(2*splitHeal+time.Second+splitGrace-time.Millisecond, w))
}
