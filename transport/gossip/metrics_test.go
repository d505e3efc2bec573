package gossip

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-project/drover/internal/freeport"
)

// MemberCounts follows a member that leaves and comes back, and forgets a
// gone member once memberlist would have.
func TestMemberCountsFollowLeaveAndReturn(t *testing.T) {
	mp, err := freeport.Get("127.0.0.64", 1)
	if err != nil {
		t.Fatal(err)
	}
	wp, err := freeport.Get("127.0.0.65", 1)
	if err != nil {
		t.Fatal(err)
	}
	masterAddr := fmt.Sprintf("127.0.0.64:%d", mp[0])
	m := start(t, RoleMaster, "m1", "127.0.0.64", mp[0])
	defer m.Shutdown()
	counts := func(wantAlive, wantGone int) func() bool {
		return func() bool { a, g := m.MemberCounts(); return a == wantAlive && g == wantGone }
	}
	if a, g := m.MemberCounts(); a != 1 || g != 0 {
		t.Fatalf("alone: %d alive, %d gone; want itself alone", a, g)
	}
	if s := m.HealthScore(); s != 0 {
		t.Fatalf("health score of a lone member: %d, want 0", s)
	}
	w := start(t, RoleWorker, "w1", "127.0.0.65", wp[0], masterAddr)
	waitUntil(t, "the master counts the worker alive", counts(2, 0))
	if err := w.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the master counts the worker gone", counts(1, 1))

	w = start(t, RoleWorker, "w1", "127.0.0.65", wp[0], masterAddr)
	defer w.Shutdown()
	waitUntil(t, "the master counts the worker back", counts(2, 0))
	if err := w.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the master counts the worker dead", counts(1, 1))
	m.d.mu.Lock()
	m.d.forget = 0
	m.d.mu.Unlock()
	if a, g := m.MemberCounts(); a != 1 || g != 0 {
		t.Fatalf("past the gossip-to-the-dead time: %d alive, %d gone; want the dead worker forgotten", a, g)
	}
}
