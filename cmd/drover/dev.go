package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/devsecrets"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/internal/wait"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport/gossip"
)

// restartStable and restartMax shape the back-off of --restart-after: a
// node that dies again within restartStable of its restart waits twice as
// long as before, up to restartMax (or --restart-after, when longer).
const (
	restartStable = 30 * time.Second
	restartMax    = time.Minute
)

const devAbout = `Runs a whole local cluster, masters and workers as separate processes of
this binary, secured with throwaway credentials in DIR/secrets, and prints
the addresses, PIDs and the exports a shell needs. Ctrl-C stops it: workers
first, then masters; then it removes the temporary directory it made,
unless --keep (a --dir, new or empty, is always kept). A start that fails
removes it too: a node that exits before the cluster is up ends dev, with
the last lines of its log.

A node that dies later (kill -9 the leader to watch a failover) is
restarted with the same flags and data after --restart-after, and dev
prints the last lines of its log. The default, 10s, outlasts
what the cluster does about a death here: a new leader within about a
second; a killed worker's drivers stopped by their runners as soon as they
see it gone, and the worker declared lost, its supervised drivers queued
again, within about a second of its death (0.6 to 1.0s measured). So each
failover plays out in full before the node comes back. A node that dies
again within 30s of its restart waits twice as long as the time before,
up to a minute.

With --spark-rest-port P, master mN serves Spark's REST submission
protocol on P+N-1, and dev prints the spark://host:P,host:P+1,... URL that
spark-submit --deploy-mode cluster takes; --spark-launcher sets the
command its drivers run.`

// devNode is one child process of the development cluster.
type devNode struct {
	role, id string
	http     string
	gossip   string
	// spark is host:port of a master's Spark REST listener, if any.
	spark string
	args  []string
	cmd   *exec.Cmd
	// done is closed once the process has exited and been reaped.
	done chan struct{}
	// started is when cmd started; pause is the wait before the node's
	// last restart (0 before its first): restartPause's inputs.
	started time.Time
	pause   time.Duration
}

func runDev(args []string) int {
	fs := subFlags("dev", "[flags]", devAbout, os.Stdout)
	dir := fs.String("dir", "", "new or empty directory for data, work dirs and logs, kept when dev stops (default: a new temporary directory)")
	bind := fs.String("bind", "127.0.0.1", "IP address every node binds")
	nMasters := fs.Int("masters", 3, "number of masters (3 or 5 for a quorum that survives a loss)")
	nWorkers := fs.Int("workers", 2, "number of workers")
	cores := fs.Int("worker-cores", 4, "cores each worker offers")
	mem := sizeFlag{mb: 4096}
	fs.Var(&mem, "worker-memory", "memory each worker offers (512m, 4g)")
	profile := fs.String("gossip-profile", "local", "memberlist timing profile: lan, local or wan")
	envFile := fs.String("env-file", "", "also write the cluster's addresses, credentials and PIDs to this file as shell variables")
	insecure := fs.Bool("insecure", false, "run without TLS, tokens and gossip encryption (plain text; loopback experiments only)")
	restartAfter := fs.Duration("restart-after", 10*time.Second, "restart a master or worker that died after this long (doubling while it keeps dying, up to 1m); 0 never")
	sparkPort := fs.Int("spark-rest-port", 0, "serve Spark's REST submission protocol on this port of m1, the next port of m2 and so on, for spark-submit --master spark://...; 0 for none")
	launcher := fs.String("spark-launcher", strings.Join(restsubmit.DefaultLauncher, " "), "with --spark-rest-port: the masters' --spark-launcher, the argv template of the driver a Spark REST submission runs (docs/spark-rest.md)")
	keep := fs.Bool("keep", false, "keep the temporary directory dev made (without --dir) when it stops; a --dir is always kept")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *nMasters < 1 || *nWorkers < 0 {
		return fail(errors.New("need at least one master and no negative worker count"))
	}
	// Checked here, as drover worker checks them, so that no cluster comes
	// up whose workers then die at start, one line in each worker's log.
	if *cores <= 0 {
		return fail(fmt.Errorf("--worker-cores %d must be positive", *cores))
	}
	if mem.mb <= 0 {
		return fail(fmt.Errorf("--worker-memory must be positive"))
	}
	if *nMasters%2 == 0 {
		fmt.Fprintf(os.Stderr, "drover dev: warning: %d masters survive no more losses than %d; a quorum of an odd number is the usual choice\n", *nMasters, *nMasters-1)
	}
	if *restartAfter < 0 {
		return fail(errors.New("--restart-after must not be negative"))
	}
	if *sparkPort < 0 || (*sparkPort > 0 && *sparkPort+*nMasters-1 > 65535) {
		return fail(fmt.Errorf("--spark-rest-port %d: the masters need ports %d to %d", *sparkPort, *sparkPort, *sparkPort+*nMasters-1))
	}
	// Checked here, as each master would, so that a mistyped template is
	// one line now rather than a cluster whose masters all die at start.
	if fs.Changed("spark-launcher") {
		if *sparkPort == 0 {
			return fail(errors.New("--spark-launcher needs --spark-rest-port: without it no master serves Spark's REST protocol"))
		}
		if _, err := restsubmit.SplitLauncher(*launcher); err != nil {
			return fail(fmt.Errorf("--spark-launcher: %w", err))
		}
	}
	// The flags dev hands every node, checked as the nodes check them:
	// otherwise each node dies at start, its reason in its log only.
	if net.ParseIP(*bind) == nil {
		return fail(fmt.Errorf("--bind %q is not an IP address", *bind))
	}
	if _, err := gossip.ProfileConfig(*profile); err != nil {
		return fail(fmt.Errorf("--gossip-profile: %w", err))
	}
	if *envFile != "" {
		if err := checkEnvFile(*envFile); err != nil {
			return fail(err)
		}
	}
	if *dir != "" {
		if err := checkNewDir(*dir); err != nil {
			return fail(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	// The Spark ports are held while the other ports are picked, so that
	// none of those lands on one of them; both before any file is made,
	// as an address this machine does not have fails here.
	held, err := holdPorts(*bind, *sparkPort, *nMasters)
	if err != nil {
		return fail(fmt.Errorf("--spark-rest-port: %w", err))
	}
	// Until the masters start; then held is nil.
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports, err := freeport.Get(*bind, 3**nMasters+2**nWorkers)
	if err != nil {
		return fail(fmt.Errorf("--bind: %w", err))
	}
	// 0711: a worker run as root runs programs as nobody, who must pass
	// through to their working directories; the secrets and the masters'
	// data are in directories of their own, 0700.
	// removeDir says dev made the directory and deletes it once its
	// nodes have stopped, whatever stopped them: a temporary directory
	// left by every Ctrl-C or failed start would fill /tmp with the
	// masters' logs and snapshots, and a CA key.
	removeDir := false
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "drover-dev-"); err == nil {
			err = os.Chmod(*dir, 0o711)
		}
		removeDir = !*keep
	} else {
		err = os.MkdirAll(*dir, 0o711)
	}
	if err != nil {
		return fail(err)
	}
	var nodes []*devNode
	defer func() {
		// After stopNodes, deferred below: no node writes there any more.
		if !removeDir {
			fmt.Printf("kept %s (a new drover dev needs a new or empty --dir)\n", *dir)
			return
		}
		if err := os.RemoveAll(*dir); err != nil {
			fmt.Fprintf(os.Stderr, "drover dev: %v\n", err)
			return
		}
		fmt.Printf("removed %s (--keep keeps it)\n", *dir)
	}()
	defer func() { stopNodes(nodes) }()
	// Secured like production, with throwaway credentials, so that what
	// works here works there.
	var sec *devsecrets.Secrets
	if !*insecure {
		s, err := devsecrets.Make(filepath.Join(*dir, "secrets"), *bind)
		if err != nil {
			return fail(fmt.Errorf("dev credentials: %w", err))
		}
		sec = &s
	}
	next := func() string { p := ports[0]; ports = ports[1:]; return fmt.Sprint(p) }
	hostPort := func(p string) string { return net.JoinHostPort(*bind, p) }

	var peers, httpAddrs, gossipAddrs, sparkAddrs []string
	for i := 1; i <= *nMasters; i++ {
		id := fmt.Sprintf("m%d", i)
		raftP, httpP, gossipP := next(), next(), next()
		peers = append(peers, id+"="+hostPort(raftP))
		httpAddrs = append(httpAddrs, hostPort(httpP))
		gossipAddrs = append(gossipAddrs, hostPort(gossipP))
		n := &devNode{role: "master", id: id, http: hostPort(httpP), gossip: hostPort(gossipP), args: []string{
			"master", "--id", id, "--data-dir", filepath.Join(*dir, id), "--bind", *bind,
			"--raft-port", raftP, "--http-port", httpP, "--gossip-port", gossipP,
			"--gossip-profile", *profile,
		}}
		if *sparkPort != 0 {
			p := fmt.Sprint(*sparkPort + i - 1)
			n.spark = hostPort(p)
			sparkAddrs = append(sparkAddrs, n.spark)
			n.args = append(n.args, "--spark-rest-port", p)
			if fs.Changed("spark-launcher") {
				n.args = append(n.args, "--spark-launcher", *launcher)
			}
		}
		nodes = append(nodes, n)
	}
	masters := strings.Join(httpAddrs, ",")
	// Spark's multi-master form: its client tries each in turn until one
	// answers that it is not a standby.
	sparkURL := ""
	if sparkAddrs != nil {
		sparkURL = "spark://" + strings.Join(sparkAddrs, ",")
	}
	for _, n := range nodes {
		n.args = append(n.args, "--peers", strings.Join(peers, ","), "--join", strings.Join(gossipAddrs, ","))
	}
	for i := 1; i <= *nWorkers; i++ {
		id := fmt.Sprintf("w%d", i)
		httpP, gossipP := next(), next()
		nodes = append(nodes, &devNode{role: "worker", id: id, http: hostPort(httpP), gossip: hostPort(gossipP), args: []string{
			"worker", "--id", id, "--masters", masters, "--work-dir", filepath.Join(*dir, id),
			"--cores", fmt.Sprint(*cores), "--memory", mem.String(), "--bind", *bind,
			"--http-port", httpP, "--gossip-port", gossipP, "--join", strings.Join(gossipAddrs, ","),
			"--gossip-profile", *profile,
		}})
	}
	if sec != nil {
		// Each node gets a certificate of its own, naming its ID.
		for _, n := range nodes {
			args, err := sec.Args(pki.Role(n.role), n.id, true)
			if err != nil {
				return fail(fmt.Errorf("dev credentials: %w", err))
			}
			n.args = append(n.args, args...)
		}
	}

	for _, l := range held {
		l.Close()
	}
	held = nil
	for _, n := range nodes {
		if err := n.start(self, *dir); err != nil {
			return fail(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	env := devEnv(masters, sparkURL, sec)
	// Only this goroutine starts nodes and reads their commands: the
	// cluster's readiness, deaths and due restarts reach it as events.
	ready := make(chan error, 1)
	go func() { ready <- waitReady(ctx, httpAddrs, *nWorkers, sec) }()
	exited, due := make(chan *devNode), make(chan *devNode)
	for _, n := range nodes {
		n.watch(ctx, exited)
	}
	restartLater := func(n *devNode) {
		go func(pause time.Duration) {
			if wait.Sleep(ctx, pause) {
				select {
				case due <- n:
				case <-ctx.Done():
				}
			}
		}(n.pause)
	}
	up := false
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nstopping the dev cluster")
			return 0
		case err := <-ready:
			if ctx.Err() != nil {
				continue
			}
			if err != nil {
				for _, n := range nodes {
					printLogTail(*dir, n, 1)
				}
				return fail(fmt.Errorf("cluster did not come up within 60s: %w", err))
			}
			// Before the banner: a cluster is announced only once its
			// env file, which scripts wait for, is written.
			if *envFile != "" {
				if err := writeEnvFile(*envFile, *dir, env, nodes); err != nil {
					return fail(err)
				}
			}
			up = true
			printDev(os.Stdout, self, *dir, masters, sparkURL, env, nodes, sec)
		case n := <-exited:
			// select picks at random among ready channels: a node that
			// dies as dev stops must not come back.
			if ctx.Err() != nil {
				continue
			}
			if !up {
				// Before the cluster is up no one uses it, and a node
				// that could not start (a port taken since dev picked
				// it, a bad flag) would fail the same way again with
				// the same flags: a restart would loop.
				printLogTail(*dir, n, logTailLines)
				return fail(fmt.Errorf("%s %s (pid %d) exited before the cluster was up: %s", n.role, n.id, n.cmd.Process.Pid, n.cmd.ProcessState))
			}
			fmt.Printf("%s %s (pid %d) exited: %s", n.role, n.id, n.cmd.Process.Pid, n.cmd.ProcessState)
			if *restartAfter == 0 {
				fmt.Println("; not restarted (--restart-after 0)")
				printLogTail(*dir, n, logTailLines)
				continue
			}
			n.pause = restartPause(*restartAfter, n.pause, time.Since(n.started))
			fmt.Printf("; restarting it in %s\n", n.pause)
			printLogTail(*dir, n, logTailLines)
			restartLater(n)
		case n := <-due:
			if ctx.Err() != nil {
				continue
			}
			if err := n.start(self, *dir); err != nil {
				n.pause = restartPause(*restartAfter, n.pause, 0)
				fmt.Printf("%s; trying again in %s\n", err, n.pause)
				restartLater(n)
				continue
			}
			fmt.Printf("%s %s restarted: pid %d\n", n.role, n.id, n.cmd.Process.Pid)
			n.watch(ctx, exited)
			// Scripts read PIDs from the env file: keep it true.
			if up && *envFile != "" {
				if err := writeEnvFile(*envFile, *dir, env, nodes); err != nil {
					fmt.Fprintln(os.Stderr, "drover:", err)
				}
			}
		}
	}
}

// printDev prints to w what a user needs once the cluster is up: where it runs,
// each node, the credentials and the exports of env.
func printDev(w io.Writer, self, dir, masters, sparkURL string, env []string, nodes []*devNode, sec *devsecrets.Secrets) {
	scheme := "http"
	if sec != nil {
		scheme = "https"
	}
	fmt.Fprintf(w, "Drover dev cluster is up in %s\n\n", dir)
	fmt.Fprintf(w, "  masters: %s\n", masters)
	if sparkURL != "" {
		fmt.Fprintf(w, "  spark:   %s\n", sparkURL)
	}
	fmt.Fprintln(w)
	for _, n := range nodes {
		fmt.Fprintf(w, "  %-6s %-3s %s://%-21s pid %-7d log %s\n", n.role, n.id, scheme, n.http, n.cmd.Process.Pid, filepath.Join(dir, n.id+".log"))
	}
	if sec != nil {
		fmt.Fprintf(w, "\nTLS, tokens and gossip encryption are on, with throwaway credentials in %s\n"+
			"(operator token: %s; --insecure runs without them).\n", sec.Dir, sec.OperatorToken)
		// The exports carry the submit token, which drover operator's
		// calls refuse; the operator token goes the same way, by the
		// variable the CLI reads (or --token-file).
		fmt.Fprintf(w, "Operator commands take the operator token the way the CLI reads any token file:\n"+
			"  %s=%s %s operator namespace list\n", client.EnvTokenFile, shellQuote(sec.OperatorToken), self)
	} else {
		fmt.Fprintf(w, "\n--insecure: no TLS, no tokens, no gossip encryption.\n")
	}
	fmt.Fprintf(w, "\nTry:\n")
	for _, kv := range env {
		fmt.Fprintf(w, "  %s\n", exportLine(kv))
	}
	fmt.Fprintf(w, "  %s client submit --wait -- /bin/echo hello\n  %s client list\n", self, self)
	switch {
	case sparkURL != "" && sec == nil:
		// Spark's client sends a cluster-mode submission through REST
		// only with this property set; without it, it speaks Spark's RPC.
		fmt.Fprintf(w, "  spark-submit --master \"$%s\" --deploy-mode cluster --conf spark.master.rest.enabled=true --class CLASS JAR\n", sparkMasterEnv)
	case sparkURL != "":
		// Spark's REST client speaks plain HTTP and sends no token.
		fmt.Fprintf(w, "  curl --cacert %s -H \"Authorization: Bearer $(cat %s)\" https://%s/v1/submissions/status/DRIVER_ID\n"+
			"  (spark-submit reaches only masters without TLS and tokens: --insecure)\n", sec.CA, sec.SubmitToken, nodes[0].spark)
	}
	fmt.Fprintf(w, "\nPress Ctrl-C to stop the cluster.\n")
}

// logTailLines is how many lines of a node's log dev prints when the node
// exits: the last is its reason, the ones before what led to it.
const logTailLines = 3

// logTailBytes bounds what dev reads of a log's end, and so the lines it
// prints: a node's log may be large, and its lines long.
const logTailBytes = 4 << 10

// printLogTail prints the last n lines of node's log in dir, each
// indented and named by the log, since the cause of an exit is in the log
// alone. A log it cannot read is said in one line.
func printLogTail(dir string, node *devNode, n int) {
	path := filepath.Join(dir, node.id+".log")
	lines, err := logTail(path, n)
	if err != nil {
		fmt.Printf("  %s: %v\n", filepath.Base(path), err)
		return
	}
	for _, l := range lines {
		fmt.Printf("  %s: %s\n", filepath.Base(path), l)
	}
}

// logTail returns the last n non-empty lines of the file at path, read
// from at most its last logTailBytes; a line cut by that bound is dropped,
// unless it is the only one, and invalid UTF-8 is replaced.
func logTail(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-logTailBytes, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.ToValidUTF8(string(b), "\uFFFD"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if off > 0 && len(lines) > 1 {
		lines = lines[1:]
	}
	return lines[max(len(lines)-n, 0):], nil
}

// checkEnvFile refuses an --env-file that could not be written, before
// dev starts anything: the file is written only once the cluster is up.
// Its directory must exist; a file is made there and removed.
func checkEnvFile(path string) error {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil {
		return fmt.Errorf("--env-file %s: %w", path, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("--env-file %s: %s is not a directory", path, filepath.Dir(path))
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("--env-file %s: %w", path, err)
	}
	f.Close()
	return os.Remove(tmp)
}

// checkNewDir refuses a --dir that holds anything: dev would mix a new
// cluster's credentials, Raft stores and ports with an earlier one's, and
// it does not resume a cluster (its masters' Raft configurations name the
// ports of their first run, which dev picks anew).
func checkNewDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--dir: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("--dir %s is not empty (an earlier drover dev's?): dev starts a new cluster in a new or empty directory and does not resume one; remove it or give another --dir", dir)
	}
	return nil
}

// watch sends n on exited once its current process has exited, unless ctx
// ends first.
func (n *devNode) watch(ctx context.Context, exited chan<- *devNode) {
	done := n.done
	go func() {
		<-done
		select {
		case exited <- n:
		case <-ctx.Done():
		}
	}()
}

// restartPause is the wait before restarting a node that died after
// running for ran, when the wait before its previous restart was prev (0
// for none): base after a first death or a run of restartStable or more,
// else twice prev up to restartMax (or base, when longer), so that a node
// that cannot start is tried 10s, 20s, 40s... apart rather than in a loop.
func restartPause(base, prev, ran time.Duration) time.Duration {
	if prev == 0 || ran >= restartStable {
		return base
	}
	return min(2*prev, max(base, restartMax))
}

// holdPorts listens on n ports of ip from port on (none when port is 0),
// and fails naming the first one taken.
func holdPorts(ip string, port, n int) ([]net.Listener, error) {
	if port == 0 {
		return nil, nil
	}
	var held []net.Listener
	for p := port; p < port+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(p)))
		if err != nil {
			for _, h := range held {
				h.Close()
			}
			return nil, fmt.Errorf("port %d of %s (one for each of %d masters from %d): %w", p, ip, n, port, err)
		}
		held = append(held, l)
	}
	return held, nil
}

// start starts (or restarts) the node's process, its output appended to
// DIR/ID.log. On failure the node keeps its previous process, if any.
func (n *devNode) start(self, dir string) error {
	logf, err := os.OpenFile(filepath.Join(dir, n.id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start %s %s: %w", n.role, n.id, err)
	}
	defer logf.Close()
	cmd := exec.Command(self, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The shell's DROVER_* variables (a client's token file, say) are for
	// the client, not for nodes, which read every flag from them.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROVER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Children die with the dev process even when it is killed with
	// SIGKILL, and stay out of the terminal's process group so that Ctrl-C
	// reaches only dev, which then stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s %s: %w", n.role, n.id, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done, n.started = cmd, done, time.Now()
	return nil
}

// stopNodes stops every node still running: workers first, waiting for
// them, so that their decommission and their drivers' last states reach
// the masters; then the masters. A role's nodes still running 15 s after
// their SIGTERM get SIGKILL.
func stopNodes(nodes []*devNode) {
	for _, role := range []string{"worker", "master"} {
		var started []*devNode
		for _, n := range nodes {
			if n.done != nil && n.role == role {
				started = append(started, n)
				_ = n.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		timer := time.NewTimer(15 * time.Second)
	wait:
		for _, n := range started {
			select {
			case <-n.done:
			case <-timer.C:
				for _, m := range started {
					_ = m.cmd.Process.Kill()
				}
				break wait
			}
		}
		timer.Stop()
		for _, n := range started {
			<-n.done
		}
	}
}

// sparkMasterEnv names the Spark URL in the exports. Spark reads $MASTER
// itself, but that would also reach any spark-submit started from the
// shell, a dev cluster's own drivers included, so this one it does not.
const sparkMasterEnv = "SPARK_MASTER_URL"

// devEnv is what a shell needs to use the dev cluster: the masters, the
// Spark URL when there is one and, when secured, the CA and the submit
// token's file.
func devEnv(masters, sparkURL string, sec *devsecrets.Secrets) []string {
	env := []string{"DROVER_MASTERS=" + masters}
	if sparkURL != "" {
		env = append(env, sparkMasterEnv+"="+sparkURL)
	}
	if sec != nil {
		env = append(env, client.EnvCACert+"="+sec.CA, client.EnvTokenFile+"="+sec.SubmitToken)
	}
	return env
}

// waitReady waits until a leader is known and workers workers are ALIVE,
// asking every master in turn with the operator's credentials.
func waitReady(ctx context.Context, masters []string, workers int, sec *devsecrets.Secrets) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	opts := client.Options{RequestTimeout: 2 * time.Second}
	if sec != nil {
		var err error
		if opts, err = client.SecureOptions(sec.CA, "", "", sec.OperatorToken); err != nil {
			return err
		}
		opts.RequestTimeout = 2 * time.Second
	}
	var clients []*client.Client
	for _, m := range masters {
		c, err := client.New([]string{m}, opts)
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	var last error
	for {
		for _, c := range clients {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := c.State(cctx)
			ccancel()
			if err != nil {
				last = err
				continue
			}
			if st.Leader == "" || st.Leader != st.ID {
				last = fmt.Errorf("master %s: no leader yet", st.ID)
				continue
			}
			alive := 0
			for _, w := range st.Workers {
				if w.State == model.WorkerAlive {
					alive++
				}
			}
			if alive >= workers {
				return nil
			}
			last = fmt.Errorf("%d of %d workers registered", alive, workers)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v (%w)", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeEnvFile writes env (devEnv) as export lines and DROVER_DEV_DIR
// and, per node, <ID>_PID and <ID>_HTTP as assignments, every value
// single-quoted, so that `. FILE` in a shell sets them and the
// exports reach `drover client` run from it. DROVER_DEV_DIR is not
// exported: a client warns of DROVER_* variables it does not know.
func writeEnvFile(path, dir string, env []string, nodes []*devNode) error {
	var b strings.Builder
	for _, kv := range env {
		fmt.Fprintln(&b, exportLine(kv))
	}
	fmt.Fprintf(&b, "DROVER_DEV_DIR=%s\n", shellQuote(dir))
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s_PID=%d\n%s_HTTP=%s\n", n.id, n.cmd.Process.Pid, n.id, shellQuote(n.http))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// exportLine is the shell line that exports kv, a K=V of devEnv.
func exportLine(kv string) string {
	k, v, _ := strings.Cut(kv, "=")
	return "export " + k + "=" + shellQuote(v)
}

// shellQuote quotes s for a POSIX shell, unless it holds only characters
// no shell treats specially (addresses and most paths): in single quotes
// nothing is special but the single quote itself, which closes the
// quotes, is escaped and opens them again.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
