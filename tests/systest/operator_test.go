package systest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// operatorCLI runs "drover operator ARGS" against c and returns stdout,
// stderr and the exit code.
func operatorCLI(t *testing.T, c *testcluster.Cluster, args ...string) (string, string, int) {
	t.Helper()
	return runDrover(t, c.ClientEnv(), append([]string{"operator", "--timeout", "30s"}, args...)...)
}

// mustOperator is operatorCLI that fails the test unless it exits 0.
func mustOperator(t *testing.T, c *testcluster.Cluster, args ...string) string {
	t.Helper()
	out, errOut, code := operatorCLI(t, c, args...)
	if code != 0 {
		t.Fatalf("drover operator %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// voters returns the IDs of the voters and the leader, from the leader.
func voters(t *testing.T, cl *client.Client) (ids []string, leader string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := cl.RaftPeers(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Peers {
		if s.Suffrage == "Voter" {
			ids = append(ids, s.ID)
		}
		if s.Leader {
			leader = s.ID
		}
	}
	return ids, leader
}

// submitLoad submits drivers one after another through cl until stop is
// closed, and returns the IDs of every acknowledged submission.
func submitLoad(cl *client.Client, stop <-chan struct{}) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		var ids []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- ids
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			res, err := cl.Submit(ctx, api.SubmitRequest{Token: fmt.Sprintf("load-%d", i), Name: "load",
				DriverSpec: model.DriverSpec{
					Argv:     []string{"true"},
					Cores:    1,
					MemoryMB: 16,
				}})
			cancel()
			if err == nil {
				ids = append(ids, res.DriverID)
			}
		}
	}()
	return out
}

// TestQuorumOperationsUnderLoad grows a three-master cluster to five,
// hands leadership to a new master, shrinks back, removes a SIGKILLed
// master, all while a client submits; every acknowledged submission is
// then in the tables, and every live master holds the same tables.
func TestQuorumOperationsUnderLoad(t *testing.T) {
	// Finished drivers are kept, so that "not found" can only mean lost.
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerCores: 64, MasterArgs: []string{"--retained-drivers", "1000000"}})
	cl := c.Client()
	stop := make(chan struct{})
	acked := submitLoad(cl, stop)
	var stopOnce sync.Once
	t.Cleanup(func() { stopOnce.Do(func() { close(stop) }) })

	// Grow: two masters started without --peers are added as voters.
	m4, m5 := c.AddMaster("m4"), c.AddMaster("m5")
	for _, m := range []*testcluster.Node{m4, m5} {
		mustOperator(t, c, "raft", "add-voter", "--id", m.ID, "--address", m.Raft)
	}
	if ids, _ := voters(t, cl); len(ids) != 5 {
		t.Fatalf("after two add-voter: voters %v", ids)
	}
	// Adding the same voter again changes nothing.
	mustOperator(t, c, "raft", "add-voter", "--id", "m4", "--address", m4.Raft)

	// Hand leadership to a new master under load.
	out := mustOperator(t, c, "raft", "transfer-leadership", "--id", "m5")
	if !strings.Contains(out, "m5") {
		t.Fatalf("transfer-leadership printed %q", out)
	}
	if _, leader := voters(t, cl); leader != "m5" {
		t.Fatalf("leader after transfer to m5 is %s", leader)
	}

	// Shrink back: remove both, the leader among them.
	for _, m := range []*testcluster.Node{m4, m5} {
		mustOperator(t, c, "raft", "remove-peer", "--id", m.ID)
	}
	ids, leader := voters(t, cl)
	if len(ids) != 3 || leader == "m4" || leader == "m5" {
		t.Fatalf("after removing m4 and m5: voters %v, leader %s", ids, leader)
	}
	m4.Stop(10 * time.Second)
	m5.Stop(10 * time.Second)

	// A dead master is removed; two voters carry on.
	dead := c.Masters[2]
	if leader == dead.ID {
		mustOperator(t, c, "raft", "transfer-leadership", "--id", c.Masters[0].ID)
	}
	dead.Kill()
	// list-peers, its flags after the command, says the dead voter does
	// not answer and the others do.
	peers, errOut, code := runDrover(t, c.ClientEnv(), "operator", "raft", "list-peers", "--timeout", "30s", "--stale")
	for _, l := range strings.Split(strings.TrimSpace(peers), "\n")[1:] {
		answers := strings.Contains(l, " yes")
		if code != 0 || strings.HasPrefix(l, dead.ID+" ") == answers {
			t.Fatalf("list-peers with %s dead: exit %d\n%s%s", dead.ID, code, peers, errOut)
		}
	}
	mustOperator(t, c, "raft", "remove-peer", "--id", dead.ID)
	if ids, _ := voters(t, cl); len(ids) != 2 {
		t.Fatalf("after removing the dead master: voters %v", ids)
	}
	list := mustOperator(t, c, "raft", "list-peers")
	if strings.Contains(list, dead.ID+" ") || !strings.Contains(list, "leader") {
		t.Fatalf("list-peers after removing %s:\n%s", dead.ID, list)
	}

	stopOnce.Do(func() { close(stop) })
	got := <-acked
	if len(got) < 20 {
		t.Fatalf("only %d submissions were acknowledged during the operations", len(got))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, id := range got {
		if _, err := cl.Driver(ctx, id); err != nil {
			t.Fatalf("acknowledged %s is lost: %v", id, err)
		}
	}
	t.Logf("%d acknowledged submissions, none lost", len(got))
	waitSameTables(t, c, c.Masters[0], c.Masters[1])

	// Bad requests change nothing.
	for _, args := range [][]string{
		{"raft", "remove-peer", "--id", "../x"},
		{"raft", "add-voter", "--id", "../x", "--address", "127.0.0.1:1"},
		{"raft", "add-voter", "--id", "m9", "--address", "no-port"},
		{"raft", "transfer-leadership", "--id", "nobody"},
		{"raft", "add-voter", "--id", "m9"},
	} {
		if _, errOut, code := operatorCLI(t, c, args...); code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("drover operator %v: exit %d, stderr %q; want 1 and one line", args, code, errOut)
		}
	}
}

// TestSIGTERMLeaderHandsOver: a leader stopped with SIGTERM transfers
// leadership before it exits, so writes resume without waiting out an
// election timeout.
func TestSIGTERMLeaderHandsOver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	start := time.Now()
	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.Submit(ctx, api.SubmitRequest{Token: "after-term", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 16}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM to the leader until the next accepted write: %s", time.Since(start).Round(time.Millisecond))
	waitFor(t, 20*time.Second, "old leader exits", func() bool { return !leader.Running() })
	b, err := os.ReadFile(filepath.Join(c.Dir, leader.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("handed leadership over before stopping")) {
		t.Fatalf("the leader did not hand over before exiting; its log:\n%s", b)
	}
	if l, err := c.Leader(10 * time.Second); err != nil || l == leader {
		t.Fatalf("no new leader: %v", err)
	}
}

// stateByte returns the offset in a snapshot archive (a tar) of a byte in
// the middle of its state.bin, for a damage the checksums must catch:
// a byte of the tar's padding would change nothing.
func stateByte(t *testing.T, archive []byte) int {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("no state.bin in the archive: %v", err)
		}
		if hdr.Name == "state.bin" {
			// The content follows its 512-byte header.
			at := bytes.Index(archive, []byte("state.bin\x00"))
			return at + 512 + int(hdr.Size)/2
		}
	}
}

// TestSnapshotSaveAndRestore: a snapshot saved with the CLI, right after a
// master joined, restores the
// tables as they were (a driver submitted after the save is gone on every
// master), new IDs do not collide, and a damaged archive is refused with
// the tables unchanged.
func TestSnapshotSaveAndRestore(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, err := cl.Submit(ctx, api.SubmitRequest{Token: "before", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 16}})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitDriver(before.DriverID, 20*time.Second, "FINISHED", isState(model.DriverFinished))
	// Saved on an idle cluster right after a membership change, which
	// hashicorp/raft will not snapshot until an entry is applied past it.
	m4 := c.AddMaster("m4")
	mustOperator(t, c, "raft", "add-voter", "--id", m4.ID, "--address", m4.Raft)
	file := filepath.Join(t.TempDir(), "backup.snap")
	mustOperator(t, c, "snapshot", "save", file)
	after, err := cl.Submit(ctx, api.SubmitRequest{Token: "after", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 16}})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitDriver(after.DriverID, 20*time.Second, "FINISHED", isState(model.DriverFinished))

	// Damaged archives: refused, nothing changes.
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hash := stateHash(t, leader)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[stateByte(t, good)] ^= 0xff
	for name, b := range map[string][]byte{"truncated": good[:len(good)/2], "flipped byte": flipped, "not an archive": []byte("hello")} {
		bad := filepath.Join(t.TempDir(), "bad.snap")
		if err := os.WriteFile(bad, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := operatorCLI(t, c, "snapshot", "restore", bad); code != 1 {
			t.Errorf("restore of a %s archive: exit %d (%s), want 1", name, code, errOut)
		}
		if stateHash(t, leader) != hash {
			t.Fatalf("restore of a %s archive changed the tables", name)
		}
	}

	mustOperator(t, c, "snapshot", "restore", file)
	// Once, not once per master the client knows.
	var restores int
	for _, m := range c.Masters {
		b, err := os.ReadFile(filepath.Join(c.Dir, m.ID+".log"))
		if err != nil {
			t.Fatal(err)
		}
		restores += bytes.Count(b, []byte("snapshot restored by an operator"))
	}
	if restores != 1 {
		t.Fatalf("the restore ran %d times", restores)
	}
	if _, err := cl.Driver(ctx, after.DriverID); !isNotFound(err) {
		t.Fatalf("driver %s submitted after the save: %v, want not found", after.DriverID, err)
	}
	if d, err := cl.Driver(ctx, before.DriverID); err != nil || d.State != model.DriverFinished {
		t.Fatalf("driver %s from before the save: %+v, %v", before.DriverID, d, err)
	}
	waitSameTables(t, c, c.Masters...)
	next, err := cl.Submit(ctx, api.SubmitRequest{Token: "next", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 16}})
	if err != nil {
		t.Fatal(err)
	}
	if next.DriverID == before.DriverID {
		t.Fatalf("a new driver reused the ID %s", next.DriverID)
	}
	c.WaitDriver(next.DriverID, 20*time.Second, "FINISHED", isState(model.DriverFinished))
}

func isNotFound(err error) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Status == 404
}
