// Package mastertest runs a cluster of real masters inside the test
// process (Nomad's TestServer and TestJoin, in Drover's shape): each with
// its own data dir and free ports on 127.0.0.1, Raft timeouts fit for a
// test, and the gossip pool joined through the first master. A test drives
// it through the client package as a user would, stops and restarts
// masters, and checks what the leader decided, in seconds rather than the
// minutes of the process-level suite (package systest).
package mastertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
)

// failSafe bounds every wait, so that a broken cluster fails its test
// instead of hanging it.
const failSafe = 30 * time.Second

// Node is one master of a Cluster.
type Node struct {
	ID string
	// Config is what the master runs with; Restart runs it again.
	Config master.Config

	mu sync.Mutex
	m  *master.Master
}

// Master returns the running master, nil while it is stopped.
func (n *Node) Master() *master.Master {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m
}

// HTTP is the master's API address.
func (n *Node) HTTP() string {
	return net.JoinHostPort(n.Config.BindIP, strconv.Itoa(n.Config.HTTPPort))
}

// Cluster is a set of masters that bootstrapped one Raft configuration.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
}

// gossipKey is the gossip key (AES-128) Start gives masters that run
// tokens or TLS, which refuse to start without one.
var gossipKey = []byte("0123456789abcdef")

// Start starts n masters m1..mN that bootstrap one cluster and waits until
// one of them is the ready leader. configure, when not nil, changes each
// master's Config before it starts. Masters that configure gives tokens
// and no TLS get one raft key, and masters it gives tokens or TLS one
// gossip key, as an operator must give them, unless configure gave one.
// Every master is stopped when the test ends.
func Start(t testing.TB, n int, configure func(*master.Config)) *Cluster {
	t.Helper()
	ports, err := freeport.Get("127.0.0.1", 3*n)
	if err != nil {
		t.Fatal(err)
	}
	key := pki.NewRaftKey()
	c := &Cluster{t: t}
	var peers []master.Peer
	for i := range n {
		cfg := master.DefaultConfig()
		cfg.ID = fmt.Sprintf("m%d", i+1)
		cfg.DataDir = t.TempDir()
		cfg.BindIP = "127.0.0.1"
		cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = ports[3*i], ports[3*i+1], ports[3*i+2]
		cfg.GossipProfile = "local"
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		peers = append(peers, master.Peer{ID: cfg.ID, RaftAddr: net.JoinHostPort(cfg.BindIP, strconv.Itoa(cfg.RaftPort))})
		c.Nodes = append(c.Nodes, &Node{ID: cfg.ID, Config: cfg})
	}
	join := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))
	for _, nd := range c.Nodes {
		nd.Config.Peers = peers
		if nd.ID != "m1" {
			nd.Config.Join = []string{join}
		}
		if configure != nil {
			configure(&nd.Config)
		}
		tokens := nd.Config.OperatorToken != "" || nd.Config.SubmitToken != ""
		if tokens && !nd.Config.TLS.Enabled() && nd.Config.RaftKey == nil {
			nd.Config.RaftKey = key
		}
		if (tokens || nd.Config.TLS.Enabled()) && nd.Config.GossipKey == nil {
			nd.Config.GossipKey = gossipKey
		}
	}
	t.Cleanup(c.stopAll)
	for _, nd := range c.Nodes {
		c.Restart(nd)
	}
	c.Leader()
	return c
}

// Restart starts a stopped node again, on its data dir.
func (c *Cluster) Restart(n *Node) {
	c.t.Helper()
	m, err := master.New(n.Config)
	if err != nil {
		c.t.Fatalf("start %s: %v", n.ID, err)
	}
	n.mu.Lock()
	n.m = m
	n.mu.Unlock()
}

// Stop stops a node (Close: a leader hands over first).
func (c *Cluster) Stop(n *Node) {
	n.mu.Lock()
	m := n.m
	n.m = nil
	n.mu.Unlock()
	if m != nil {
		_ = m.Close()
	}
}

func (c *Cluster) stopAll() {
	for _, n := range c.Nodes {
		c.Stop(n)
	}
}

// Leader waits until one running master is the ready leader by its own
// account and every running master names it, and returns it.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	deadline := time.Now().Add(failSafe)
	for {
		if n := c.agreedLeader(); n != nil {
			return n
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader that every running master names within %s", failSafe)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Cluster) agreedLeader() *Node {
	var leader *Node
	for _, n := range c.Nodes {
		m := n.Master()
		if m == nil {
			continue
		}
		st, err := c.state(n)
		if err != nil || st.Leader == "" || (leader != nil && leader.ID != st.Leader) {
			return nil
		}
		for _, l := range c.Nodes {
			if l.ID == st.Leader {
				leader = l
			}
		}
	}
	if leader == nil || leader.Master() == nil {
		return nil
	}
	// A Raft leader takes writes before its term begins (the Barrier that
	// starts it is itself an entry), so a test that counts entries waits
	// for the term.
	if st, err := c.state(leader); err != nil || st.Role != "Leader" || st.LeadingSince == 0 {
		return nil
	}
	return leader
}

// Followers are the running masters other than the leader.
func (c *Cluster) Followers() []*Node {
	c.t.Helper()
	l := c.Leader()
	var out []*Node
	for _, n := range c.Nodes {
		if n != l && n.Master() != nil {
			out = append(out, n)
		}
	}
	return out
}

// state is one master's own view (/v1/state?stale=true): all its tables,
// which SeedTables may have made large.
func (c *Cluster) state(n *Node) (*api.State, error) {
	cl, err := client.New([]string{n.HTTP()}, client.Options{RequestTimeout: 10 * time.Second, Token: n.Config.OperatorToken,
		MaxResponseBytes: 1 << 30})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.State(ctx)
}

// Client returns a client of the given masters (every node when none is
// given), as the CLI makes one, with the operator token when the masters
// have one.
func (c *Cluster) Client(nodes ...*Node) *client.Client {
	c.t.Helper()
	if len(nodes) == 0 {
		nodes = c.Nodes
	}
	return c.client(nodes, 5*time.Second)
}

// client is a client of nodes whose requests each wait up to timeout.
func (c *Cluster) client(nodes []*Node, timeout time.Duration) *client.Client {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.HTTP())
	}
	cl, err := client.New(addrs, client.Options{RequestTimeout: timeout, RetryInterval: 20 * time.Millisecond,
		Token: c.Nodes[0].Config.OperatorToken, MaxResponseBytes: 1 << 30})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// Context is a context that ends with the fail-safe.
func (c *Cluster) Context() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	c.t.Cleanup(cancel)
	return ctx
}

// Submit submits n drivers, the submission of driver i made by mk, in
// batches of api.MaxBatchSubmissions (four in flight), and returns their
// IDs in the order of i: the quick way to a table of a hundred thousand
// drivers. mk must give each submission a token of its own; the masters
// must take four batches at once from one client
// (Config.MaxSubmitsPerClient 0) and hold n drivers not ended
// (Config.MaxLiveDrivers and MaxLiveDriversPerClient).
func (c *Cluster) Submit(n int, mk func(i int) api.SubmitRequest) []string {
	c.t.Helper()
	// A batch of a thousand takes seconds under the race detector on a
	// busy machine; the fail-safe bounds each batch, not all of them.
	cl := c.client(c.Nodes, failSafe)
	out := make([]string, n)
	var wg sync.WaitGroup
	var failed sync.Once
	var firstErr error
	slots := make(chan struct{}, 4)
	for from := 0; from < n; from += api.MaxBatchSubmissions {
		to := min(from+api.MaxBatchSubmissions, n)
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			req := api.SubmitBatchRequest{Submissions: make([]api.SubmitRequest, 0, to-from)}
			for i := from; i < to; i++ {
				req.Submissions = append(req.Submissions, mk(i))
			}
			var resp api.SubmitBatchResponse
			ctx, cancel := context.WithTimeout(context.Background(), failSafe)
			defer cancel()
			err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, req, &resp)
			for j, r := range resp.Results {
				if r.Error != nil && err == nil {
					err = fmt.Errorf("submission %d: %s", from+j, r.Error.Error)
				}
				out[from+j] = r.DriverID
			}
			if err != nil {
				failed.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		c.t.Fatal(firstErr)
	}
	return out
}

// Seed restarts node n, the only master of its cluster, on the tables
// fill makes, as a Raft snapshot in its data dir past every entry of its
// log: the quick way to hundreds of thousands of rows, one FSM apply a
// command instead of a request, a Raft entry and a disk write each. fill
// applies each command with apply, encoded as an entry carries it; one
// the FSM refuses fails the test. It returns without waiting for the
// master to lead again (Leader reads every table to see that, which
// takes long when they are large): a client's request waits for it. The
// rows' times are fill's to give; a worker it registers is one no
// process runs, which the master declares lost after its worker
// timeouts.
func (c *Cluster) Seed(n *Node, fill func(apply func(model.Command))) {
	c.t.Helper()
	c.Stop(n)
	// The tables made here are garbage once written: the master
	// restores its own from the file, in the memory they leave.
	c.writeSnapshot(n, fill)
	c.Restart(n)
}

// writeSnapshot writes the tables fill makes (see Seed) to n's data dir
// as a snapshot past every entry of its log, whose configuration is n
// alone.
func (c *Cluster) writeSnapshot(n *Node, fill func(apply func(model.Command))) {
	t := c.t
	t.Helper()
	f := fsm.New()
	// Past the entries the master wrote before it stopped.
	index := uint64(1 << 30)
	fill(func(payload model.Command) {
		t.Helper()
		data, err := fsm.Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		index++
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
		if r, ok := res.(fsm.SubmitDriversResult); ok {
			for _, o := range r.Outcomes {
				if o.Err != nil {
					res = o.Err
				}
			}
		}
		if err, ok := res.(error); ok {
			t.Fatalf("seed %s: %v", payload.CommandType(), err)
		}
	})
	snaps, err := raft.NewFileSnapshotStore(n.Config.DataDir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	self := raft.Server{ID: raft.ServerID(n.ID), Address: raft.ServerAddress(net.JoinHostPort(n.Config.BindIP, strconv.Itoa(n.Config.RaftPort)))}
	// The store writes the configuration's peers in the form of
	// snapshots before version 1 too, which takes a transport; any will do.
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{Servers: []raft.Server{self}}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
}
