// Package testcluster runs a real Drover cluster (masters and workers as
// separate drover processes) for process-level tests. Every node gets its own
// 127.x.y.z loopback address and free ports; everything a cluster starts,
// including the drivers its workers launch, is killed when the test ends.
package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/devsecrets"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
)

// BinaryEnv names an already built drover binary: for a test re-run in a
// network namespace, or for the chaos suite with its own build.
const BinaryEnv = "DROVER_TEST_BINARY"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	// built says binPath is Build's, in a directory of its own.
	built bool
)

// TB is what a cluster needs from its owner: testing.TB's methods for
// failing, logging and cleaning up. Tests pass their *testing.T; the chaos
// suite passes its own.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
}

var _ TB = testing.TB(nil)

// Binary builds the drover command once per process (or takes the one named
// by $DROVER_TEST_BINARY) and returns its path.
func Binary(t TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			binPath = p
			return
		}
		binPath, buildErr = Build("")
		built = buildErr == nil
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RemoveBuilt removes the binary Binary built, if it built one (not one
// $DROVER_TEST_BINARY named). The binary serves every test of a package,
// so no test's cleanup can remove it: a package's TestMain calls this
// after m.Run.
func RemoveBuilt() {
	if built {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// Build builds the drover command into a new temporary directory, with the
// race detector when this process has it, and with the given build tags
// (comma-separated; "" for none), and returns the binary's path.
func Build(tags string) (string, error) {
	dir, err := os.MkdirTemp("", "drover-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "drover")
	return bin, GoBuild(bin, "github.com/drover-project/drover/cmd/drover", raceEnabled, tags)
}

// GoBuild builds the main package pkg (an import path of this module) into
// the file out, with the race detector when race is set and with the given
// build tags (comma-separated; "" for none). The error carries go build's
// output.
func GoBuild(out, pkg string, race bool, tags string) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if b, err := exec.Command("go", append(args, pkg)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// Options shape a cluster. Zero values take the defaults noted.
type Options struct {
	Masters int // default 3
	Workers int // default 0
	// WorkerCores and WorkerMemory are what each worker offers
	// (default 4 and "4g").
	WorkerCores  int
	WorkerMemory string
	// GossipProfile for every node (default "local").
	GossipProfile string
	// WorkerTimeout is the masters' --worker-timeout (default 1s).
	WorkerTimeout time.Duration
	// MasterArgs and WorkerArgs are appended to every master's or
	// worker's command line.
	MasterArgs, WorkerArgs []string
	// MasterExtraArgs, when set, returns more arguments for one master,
	// appended after MasterArgs: for flags whose value must differ
	// between masters, such as a port free on that master's own address
	// (n.IP).
	MasterExtraArgs func(n *Node) []string
	// ExtraPeers are appended to the masters' --peers, as id=host:port
	// (voters that never start make a quorum that cannot form).
	ExtraPeers []string
	// Binary is the drover binary to run (default: Binary's).
	Binary string
	// NoJoin starts every node without --join, as an operator following
	// the shortest command lines would: masters find each other from
	// --peers, workers from --masters.
	NoJoin bool
	// Secure runs every node with TLS, tokens and gossip encryption,
	// with credentials from internal/devsecrets in DIR/secrets (each
	// node its own certificate, naming its ID); Client and State then
	// use the CA and the operator token.
	Secure bool
	// TokensOnly runs every node with tokens and gossip encryption but
	// no TLS, the masters with a raft key and the workers with the node
	// token alone, with credentials from internal/devsecrets in
	// DIR/secrets; Client and State then use the operator token over
	// plain HTTP.
	TokensOnly bool
}

// Node is one drover process of the cluster.
type Node struct {
	Role, ID string
	IP       string
	// HTTP is host:port of the node's HTTP API.
	HTTP   string
	Gossip string
	Raft   string
	Dir    string
	args   []string
	c      *Cluster
	// logName names the node's log file (default: its ID).
	logName string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is a set of running nodes.
type Cluster struct {
	t       TB
	Dir     string
	Masters []*Node
	Workers []*Node
	// MasterAddrs is the --masters string of the cluster.
	MasterAddrs string
	opts        Options
	gossips     []string
	ip          func(int) string
	// extra are nodes started beside Masters and Workers (impostors).
	extra []*Node
	// gossipMembers counts the bare gossip members started (GossipMember),
	// each on an address of its own.
	gossipMembers int
	// Secrets are the credentials of a Secure or TokensOnly cluster, nil
	// otherwise.
	Secrets *devsecrets.Secrets
	// hc reads node states (State), with the operator's credentials when
	// Secure.
	hc *http.Client
}

// New starts a cluster and waits until a leader is elected and every worker
// is registered. Cleanup stops it.
func New(t TB, opts Options) *Cluster {
	t.Helper()
	c := Start(t, opts)
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// Start starts a cluster without waiting for it to be ready.
func Start(t TB, opts Options) *Cluster {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = Binary(t)
	}
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.WorkerCores == 0 {
		opts.WorkerCores = 4
	}
	if opts.WorkerMemory == "" {
		opts.WorkerMemory = "4g"
	}
	if opts.GossipProfile == "" {
		opts.GossipProfile = "local"
	}
	if opts.WorkerTimeout == 0 {
		opts.WorkerTimeout = time.Second
	}
	dir, err := os.MkdirTemp("", "drover-test-")
	if err == nil {
		// A worker run as root runs programs as nobody, who must pass
		// through to their working directories in the workers' dirs.
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Dir: dir, opts: opts, hc: &http.Client{Timeout: 2 * time.Second}}
	t.Cleanup(c.cleanup)
	if opts.Secure && opts.TokensOnly {
		t.Fatal("testcluster: Secure and TokensOnly exclude each other")
	}
	if opts.Secure || opts.TokensOnly {
		s, err := devsecrets.Make(filepath.Join(dir, "secrets"), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		c.Secrets = &s
	}
	if opts.Secure {
		o := c.ClientOptions()
		c.hc.Transport = &http.Transport{TLSClientConfig: o.TLS}
	}

	// A random 127.a.b.0/24 per cluster keeps parallel test processes
	// apart; each node gets its own address in it.
	a, b := 1+rand.IntN(254), rand.IntN(255)
	ip := func(i int) string { return fmt.Sprintf("127.%d.%d.%d", a, b, 10+i) }
	var peers, https, gossips []string
	for i := 0; i < opts.Masters; i++ {
		n := c.newNode("master", fmt.Sprintf("m%d", i+1), ip(i), 3)
		c.Masters = append(c.Masters, n)
		peers = append(peers, n.ID+"="+n.Raft)
		https = append(https, n.HTTP)
		gossips = append(gossips, n.Gossip)
	}
	c.MasterAddrs = strings.Join(https, ",")
	peers = append(peers, opts.ExtraPeers...)
	c.gossips = gossips
	for _, n := range c.Masters {
		c.setMasterArgs(n, "--peers", strings.Join(peers, ","))
	}
	c.ip = ip
	for i := 0; i < opts.Workers; i++ {
		c.Workers = append(c.Workers, c.newWorker(fmt.Sprintf("w%d", i+1), opts.Masters+i, ""))
	}
	for _, n := range append(append([]*Node{}, c.Masters...), c.Workers...) {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// newWorker makes (without starting it) a worker node with the given ID on
// the cluster's address number i, in dir (default: a directory named after
// the ID).
func (c *Cluster) newWorker(id string, i int, dir string) *Node {
	n := c.newNode("worker", id, c.ip(i), 2)
	if dir != "" {
		n.Dir = filepath.Join(c.Dir, dir)
	}
	_, httpPort, _ := net.SplitHostPort(n.HTTP)
	_, gossipPort, _ := net.SplitHostPort(n.Gossip)
	n.args = append([]string{"worker", "--id", n.ID, "--masters", c.MasterAddrs, "--work-dir", n.Dir,
		"--cores", strconv.Itoa(c.opts.WorkerCores), "--memory", c.opts.WorkerMemory, "--bind", n.IP,
		"--http-port", httpPort, "--gossip-port", gossipPort,
		"--gossip-profile", c.opts.GossipProfile,
	}, c.joinArgs()...)
	n.args = append(n.args, c.opts.WorkerArgs...)
	n.args = append(n.args, c.credentialArgs(n)...)
	return n
}

// credentialArgs are the flags that hand node n its credentials in a
// Secure or TokensOnly cluster (devsecrets.Secrets.Args), none otherwise.
func (c *Cluster) credentialArgs(n *Node) []string {
	if c.Secrets == nil {
		return nil
	}
	args, err := c.Secrets.Args(pki.Role(n.Role), n.ID, c.opts.Secure)
	if err != nil {
		c.t.Fatal(err)
	}
	return args
}

// joinArgs is the --join of every node, none with NoJoin.
func (c *Cluster) joinArgs() []string {
	if c.opts.NoJoin {
		return nil
	}
	return []string{"--join", strings.Join(c.gossips, ",")}
}

// setMasterArgs sets a master's command line: its addresses, the pool to
// join, the cluster's timings and credentials, then extra.
func (c *Cluster) setMasterArgs(n *Node, extra ...string) {
	_, raftPort, _ := net.SplitHostPort(n.Raft)
	_, httpPort, _ := net.SplitHostPort(n.HTTP)
	_, gossipPort, _ := net.SplitHostPort(n.Gossip)
	n.args = append([]string{"master", "--id", n.ID, "--data-dir", n.Dir, "--bind", n.IP,
		"--raft-port", raftPort, "--http-port", httpPort, "--gossip-port", gossipPort,
		"--gossip-profile", c.opts.GossipProfile, "--worker-timeout", c.opts.WorkerTimeout.String(),
		"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--raft-leader-lease", "250ms",
	}, c.joinArgs()...)
	n.args = append(n.args, extra...)
	n.args = append(n.args, c.opts.MasterArgs...)
	if c.opts.MasterExtraArgs != nil {
		n.args = append(n.args, c.opts.MasterExtraArgs(n)...)
	}
	n.args = append(n.args, c.credentialArgs(n)...)
}

// AddMaster starts a master with the given ID, on an address of its own,
// that joins the gossip pool but not Raft: it runs without --peers and
// waits to be added as a voter. It is appended to Masters.
func (c *Cluster) AddMaster(id string) *Node {
	c.t.Helper()
	n := c.newNode("master", id, c.ip(50+len(c.Masters)+len(c.extra)), 3)
	c.setMasterArgs(n)
	c.Masters = append(c.Masters, n)
	if err := n.Start(); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// AddWorker starts one more worker with the given ID, with extra appended
// to its command line last (so they override the cluster's own flags), and
// appends it to Workers.
func (c *Cluster) AddWorker(id string, extra ...string) *Node {
	c.t.Helper()
	n := c.newWorker(id, c.opts.Masters+len(c.Workers)+len(c.extra)+100, "")
	n.args = append(n.args, extra...)
	c.Workers = append(c.Workers, n)
	if err := n.Start(); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// StartImpostor starts, and returns, a second worker process that claims
// the ID of n from its own address and work dir.
func (c *Cluster) StartImpostor(n *Node) *Node {
	c.t.Helper()
	imp := c.newWorker(n.ID, c.opts.Masters+len(c.Workers)+len(c.extra), n.ID+"-impostor")
	imp.logName = n.ID + "-impostor"
	c.extra = append(c.extra, imp)
	if err := imp.Start(); err != nil {
		c.t.Fatal(err)
	}
	return imp
}

func (c *Cluster) newNode(role, id, ip string, nports int) *Node {
	ports, err := freeport.Get(ip, nports)
	if err != nil {
		c.t.Fatal(err)
	}
	hp := func(p int) string { return net.JoinHostPort(ip, strconv.Itoa(p)) }
	n := &Node{Role: role, ID: id, IP: ip, Dir: filepath.Join(c.Dir, id), c: c}
	if role == "master" {
		n.Raft, n.HTTP, n.Gossip = hp(ports[0]), hp(ports[1]), hp(ports[2])
	} else {
		n.HTTP, n.Gossip = hp(ports[0]), hp(ports[1])
	}
	return n
}

// Start starts (or restarts) the node's process with the same arguments and
// data or work dir. Its output is appended to DIR/ID.log.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("%s %s is already running", n.Role, n.ID)
		}
	}
	name := n.logName
	if name == "" {
		name = n.ID
	}
	logf, err := os.OpenFile(filepath.Join(n.c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(n.c.opts.Binary, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a test can kill a worker with everything
	// in its group, as an operator's kill of a service would; and killed
	// with its owner, so a crashed test or suite leaves no node behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s %s: %w", n.Role, n.ID, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	return nil
}

// Exited returns a channel that is closed when the node's current process
// has exited; ExitCode says how.
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.done
}

// ExitCode is the exit code of the node's process once Exited is closed
// (-1 for a process killed by a signal).
func (n *Node) ExitCode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.ProcessState.ExitCode()
}

// Log returns what the node's processes wrote so far (DIR/ID.log).
func (n *Node) Log() string {
	name := n.logName
	if name == "" {
		name = n.ID
	}
	b, _ := os.ReadFile(filepath.Join(n.c.Dir, name+".log"))
	return string(b)
}

// PID is the node's current process ID.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// Signal sends sig to the node's process.
func (n *Node) Signal(sig syscall.Signal) error {
	return syscall.Kill(n.PID(), sig)
}

// Kill sends SIGKILL to the node's process and waits until it is gone.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

// KillGroup sends SIGKILL to the node's whole process group and waits for
// the node's process to be gone.
func (n *Node) KillGroup() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills.
func (n *Node) Stop(timeout time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Running reports whether the node's process is still running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// cleanup kills every node and every process still running whose working
// directory or command line lies under the cluster's directory (runners and
// drivers), then removes the directory unless the test failed.
func (c *Cluster) cleanup() {
	for _, n := range append(append(append([]*Node{}, c.extra...), c.Workers...), c.Masters...) {
		if n.done != nil && n.Running() {
			n.KillGroup()
		}
	}
	KillUnder(c.Dir)
	for _, n := range append(append([]*Node{}, c.Workers...), c.extra...) {
		removeCgroups(n)
	}
	if c.t.Failed() {
		c.t.Logf("cluster logs kept in %s", c.Dir)
		return
	}
	if err := RemoveDir(c.Dir); err != nil {
		c.t.Logf("cluster directory left behind: %v", err)
	}
}

// RemoveDir removes dir and everything in it, as os.RemoveAll does, and
// tries again when that fails: a program the test ended may still add a
// file while the directory is walked (RemoveAll then fails with
// "directory not empty"), and a directory left so, by a test that
// passed, stays in /tmp for ever. It returns the last error after 100
// tries.
func RemoveDir(dir string) error {
	var err error
	for range 100 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// removeCgroups kills and removes what worker n left in its cgroups
// (package isolation): the units' cgroups of runners killed with the
// cluster, and the worker's own. Nothing is there without root or
// without a work dir.
func removeCgroups(n *Node) {
	instance, err := os.ReadFile(filepath.Join(n.Dir, "worker.instance"))
	if err != nil || os.Geteuid() != 0 {
		return
	}
	m, err := isolation.New(isolation.Config{Name: unitdir.WorkerCgroupName(n.ID, strings.TrimSpace(string(instance)))})
	if err != nil {
		return
	}
	if _, err := m.Sweep(func(string) bool { return false }, 5*time.Second); err != nil {
		n.c.t.Logf("cgroups of %s: %v", n.ID, err)
	}
	_ = m.Remove()
}

// KillUnder SIGKILLs, with their process groups, the processes whose cwd or
// command line names a path under dir: what a cluster leaves behind,
// drivers included. It polls until none remain (for up to 10 s).
func KillUnder(dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pids := ProcessesUnder(dir)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ProcessesUnder lists live processes whose cwd or command line names a path
// under dir.
func ProcessesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			continue
		}
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasPrefix(cwd, dir) || strings.Contains(string(cmdline), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ClientOptions are client options for the cluster: a 3 s request timeout
// and, when Secure, the CA and the operator token; when TokensOnly, the
// operator token.
func (c *Cluster) ClientOptions() client.Options {
	o := client.Options{RequestTimeout: 3 * time.Second}
	if c.Secrets != nil {
		var err error
		if o, err = client.SecureOptions(c.ca(), "", "", c.Secrets.OperatorToken); err != nil {
			c.t.Fatal(err)
		}
		o.RequestTimeout = 3 * time.Second
	}
	return o
}

// ClientEnv is the environment that gives "drover client" the cluster's
// masters and, when Secure, its CA and operator token; when TokensOnly,
// the operator token.
func (c *Cluster) ClientEnv() []string {
	env := []string{"DROVER_MASTERS=" + c.MasterAddrs}
	if c.opts.Secure {
		env = append(env, client.EnvCACert+"="+c.Secrets.CA)
	}
	if c.Secrets != nil {
		env = append(env, client.EnvTokenFile+"="+c.Secrets.OperatorToken)
	}
	return env
}

// ca is the cluster CA's file when Secure, "" otherwise.
func (c *Cluster) ca() string {
	if c.opts.Secure {
		return c.Secrets.CA
	}
	return ""
}

// Client returns a client for the cluster's masters.
func (c *Cluster) Client() *client.Client {
	cl, err := client.New(strings.Split(c.MasterAddrs, ","), c.ClientOptions())
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// Scheme is "https" for a Secure cluster, else "http".
func (c *Cluster) Scheme() string {
	if c.opts.Secure {
		return "https"
	}
	return "http"
}

// State reads /v1/state from one node.
func State(ctx context.Context, n *Node) (*api.State, error) {
	var st api.State
	if err := Get(ctx, n, "/v1/state", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Get reads the JSON answer of GET path (with its query) from node n
// itself, with the cluster's operator token when it has one, into v; an
// answer other than 200 is an error naming its status.
func Get(ctx context.Context, n *Node, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.c.Scheme()+"://"+n.HTTP+path, nil)
	if err != nil {
		return err
	}
	if n.c.Secrets != nil {
		tok, err := os.ReadFile(n.c.Secrets.OperatorToken)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := n.c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeJSON(resp, v)
}

// Follower returns a master other than leader (nil for a one-master
// cluster), whichever it is: for requests that must cross a forward.
func (c *Cluster) Follower(leader *Node) *Node {
	for _, m := range c.Masters {
		if m != leader {
			return m
		}
	}
	return nil
}

// Leader returns the running master that reports itself the ready leader
// (LeadingSince set: elected, and every earlier entry applied), polling
// until timeout. A master just elected answers writes 503 until then.
func (c *Cluster) Leader(timeout time.Duration) (*Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		for _, n := range c.Masters {
			if !n.Running() {
				continue
			}
			if st, err := State(ctx, n); err == nil && st.Role == "Leader" && st.Leader == n.ID && st.LeadingSince != 0 {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("no leader elected in time")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitReady waits until a leader is known and every running worker is ALIVE
// in its tables.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := c.Leader(time.Until(deadline))
		if err != nil {
			return err
		}
		st, err := State(context.Background(), l)
		if err == nil {
			alive := map[string]bool{}
			for _, w := range st.Workers {
				alive[w.ID] = w.State == model.WorkerAlive
			}
			ok := true
			for _, w := range c.Workers {
				if w.Running() && !alive[w.ID] {
					ok = false
				}
			}
			if ok {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workers did not register in %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitDriver polls a driver (linearizable reads) until cond holds, and
// returns it; it fails the test after timeout.
func (c *Cluster) WaitDriver(id string, timeout time.Duration, what string, cond func(*model.Driver) bool) *model.Driver {
	c.t.Helper()
	return AwaitDriver(c.t, c.Client(), id, timeout, what, cond)
}

// AwaitDriver is WaitDriver through any client: it polls the driver until
// cond holds and returns it, or fails t after timeout.
func AwaitDriver(t TB, cl *client.Client, id string, timeout time.Duration, what string, cond func(*model.Driver) bool) *model.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last *model.Driver
	for {
		d, err := cl.Driver(ctx, id)
		if err == nil {
			last = d
			if cond(d) {
				return d
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("driver %s: %s not reached in %s; last seen %+v (err %v)", id, what, timeout, last, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Worker returns the worker node with this ID.
func (c *Cluster) Worker(id string) *Node {
	for _, w := range c.Workers {
		if w.ID == id {
			return w
		}
	}
	c.t.Fatalf("no worker %s", id)
	return nil
}

func decodeJSON(resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
