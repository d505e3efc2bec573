package gossip

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-project/drover/internal/freeport"
)

func start(t *testing.T, role, id, ip string, port int, join ...string) *Pool {
	t.Helper()
	p, err := Start(Config{Meta: Meta{Role: role, ID: id, HTTP: "x:1"}, BindIP: ip, Port: port, Profile: "local", Join: join})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A worker whose only master was down long enough to be declared dead
// joins the restarted master again by itself: memberlist alone never
// contacts a dead node again.
func TestRejoinsAMasterThatCameBack(t *testing.T) {
	mp, err := freeport.Get("127.0.0.61", 1)
	if err != nil {
		t.Fatal(err)
	}
	wp, err := freeport.Get("127.0.0.62", 1)
	if err != nil {
		t.Fatal(err)
	}
	masterAddr := fmt.Sprintf("127.0.0.61:%d", mp[0])
	m := start(t, RoleMaster, "m1", "127.0.0.61", mp[0])
	w := start(t, RoleWorker, "w1", "127.0.0.62", wp[0], masterAddr)
	defer w.Shutdown()
	waitUntil(t, "master sees worker", func() bool { _, ok := m.Lookup(RoleWorker, "w1"); return ok })

	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "worker declares the master dead", func() bool { _, ok := w.Lookup(RoleMaster, "m1"); return !ok })

	// The master comes back with an empty pool and no join list.
	m = start(t, RoleMaster, "m1", "127.0.0.61", mp[0])
	defer m.Shutdown()
	waitUntil(t, "restarted master sees the worker again", func() bool { _, ok := m.Lookup(RoleWorker, "w1"); return ok })
	if meta, ok := w.Lookup(RoleMaster, "m1"); !ok || meta.HTTP != "x:1" {
		t.Fatalf("worker's view of the master: %+v %v", meta, ok)
	}
}

func TestUnknownProfile(t *testing.T) {
	if _, err := ProfileConfig("fast"); err == nil {
		t.Fatal("unknown profile accepted")
	}
}

// Lookup and Alive follow memberlist's view: a member that leaves is gone
// from both.
func TestLookupFollowsLeave(t *testing.T) {
	ports, err := freeport.Get("127.0.0.63", 2)
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, RoleMaster, "m1", "127.0.0.63", ports[0])
	defer a.Shutdown()
	b := start(t, RoleWorker, "w1", "127.0.0.63", ports[1], fmt.Sprintf("127.0.0.63:%d", ports[0]))
	waitUntil(t, "join", func() bool { _, ok := a.Lookup(RoleWorker, "w1"); return ok })
	if _, ok := a.Lookup(RoleMaster, "m1"); !ok || len(a.Alive()) != 2 {
		t.Fatalf("alive = %v, want itself and w1", a.Alive())
	}
	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "leave", func() bool { _, ok := a.Lookup(RoleWorker, "w1"); return !ok })
	if len(a.Alive()) != 1 {
		t.Fatalf("alive after leave = %v", a.Alive())
	}
}
