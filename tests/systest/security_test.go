package systest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/devsecrets"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/transport/gossip"
)

// attacker holds what someone outside the cluster, or a worker gone
// rogue, has to hand: certificates of its own CA, the cluster's worker
// certificate, and whatever it can send.
type attacker struct {
	t       *testing.T
	c       *testcluster.Cluster
	leader  *testcluster.Node
	ca      string    // the cluster CA file (public)
	rogue   pki.Files // another CA's master certificate
	worker  pki.Files // the cluster's own worker certificate
	master  pki.Files // the cluster's own master certificate
	submit  string    // the submit token
	operate string    // the operator token
}

// tlsConfig is a client config that presents f's certificate (if any) and
// trusts the cluster CA, or trusts anything when skipVerify is set, as an
// attacker who does not care whom it talks to would.
func (a *attacker) tlsConfig(f pki.Files, skipVerify bool) *tls.Config {
	a.t.Helper()
	if skipVerify {
		cfg := &tls.Config{InsecureSkipVerify: true}
		if f.Cert != "" {
			kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			if err != nil {
				a.t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		return cfg
	}
	f.CA = a.ca
	cfg, err := f.ClientConfig(pki.RoleMaster)
	if err != nil {
		a.t.Fatal(err)
	}
	return cfg
}

// request sends one HTTP(S) request and returns its status and body, or
// the transport error (a refused handshake). A body goes as JSON unless
// header says otherwise.
func request(cfg *tls.Config, method, url, token string, body io.Reader, header map[string]string) (int, string, error) {
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), nil
}

// wantStatus turns a request's outcome into nil when it was refused with
// one of the statuses.
func wantStatus(status int, body string, err error, want ...int) error {
	if err != nil {
		return fmt.Errorf("transport error %v, want status %v", err, want)
	}
	for _, w := range want {
		if status == w {
			return nil
		}
	}
	return fmt.Errorf("status %d (%s), want %v", status, strings.TrimSpace(body), want)
}

// wantHandshakeRefused is nil when err is a failed TLS handshake or a
// connection the server closed.
func wantHandshakeRefused(status int, body string, err error) error {
	if err == nil {
		return fmt.Errorf("request got through: status %d (%s)", status, strings.TrimSpace(body))
	}
	return nil
}

// TestAttacksOnSecuredCluster runs a table of attacks against a real
// secured cluster (TLS, tokens, gossip encryption; three masters, one
// worker running a driver). Each must be refused and leave the tables as
// they were; afterwards no node's log holds a token or the gossip key.
func TestAttacksOnSecuredCluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, Secure: true})
	p := newProbe(t)
	running := submit(t, c, p.request("sleep 600", true))
	c.WaitDriver(running, 20*time.Second, "RUNNING", isState(model.DriverRunning))
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := &attacker{t: t, c: c, leader: leader, ca: c.Secrets.CA, worker: nodeFiles(t, c.Secrets, pki.RoleWorker, c.Workers[0].ID),
		master: nodeFiles(t, c.Secrets, pki.RoleMaster, leader.ID),
		submit: readToken(t, c.Secrets.SubmitToken), operate: readToken(t, c.Secrets.OperatorToken)}
	rogueDir := t.TempDir()
	rogue, err := devsecrets.Make(rogueDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	a.rogue = nodeFiles(t, &rogue, pki.RoleMaster, "m1")

	follower := c.Follower(leader)
	base := "https://" + leader.HTTP
	wk := c.Workers[0]
	valid := `{"token":"attack-1","argv":["true"],"cores":1,"memory_mb":64}`
	secure := a.tlsConfig(pki.Files{}, false)
	// A driver token the masters would accept, for another driver.
	guard, err := auth.New(auth.Config{OperatorToken: a.operate, SubmitToken: a.submit})
	if err != nil {
		t.Fatal(err)
	}
	otherDriverToken := guard.DriverToken("driver-20200101000000-1", 1)
	forged := guard.DriverToken(running, 1)
	if last := forged[len(forged)-1]; last == 'A' {
		forged = forged[:len(forged)-1] + "B"
	} else {
		forged = forged[:len(forged)-1] + "A"
	}
	appBody := func(driverID string) string {
		return fmt.Sprintf(`{"token":"attack-app","driver_id":%q,"driver_attempt":1,"cores_per_executor":1,"memory_per_executor_mb":64,"argv":["true"]}`, driverID)
	}
	secretFile := filepath.Base(c.Secrets.OperatorToken)

	attacks := []struct {
		name string
		do   func() error
	}{
		{"plain HTTP to the API", func() error {
			s, b, err := request(nil, "POST", "http://"+leader.HTTP+"/v1/drivers", a.submit, strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusBadRequest)
		}},
		{"plain HTTP to a worker", func() error {
			s, b, err := request(nil, "GET", "http://"+wk.HTTP+"/v1/health", "", nil, nil)
			return wantStatus(s, b, err, http.StatusBadRequest)
		}},
		{"plain TCP to Raft", func() error { return rawRaft(leader.Raft, nil) }},
		{"API with a client certificate from another CA", func() error {
			return wantHandshakeRefused(request(a.tlsConfig(a.rogue, true), "POST", base+"/v1/drivers", a.submit, strings.NewReader(valid), nil))
		}},
		{"API server checked against another CA", func() error {
			cfg, err := a.rogue.ClientConfig(pki.RoleMaster)
			if err != nil {
				return err
			}
			return wantHandshakeRefused(request(cfg, "GET", base+"/v1/state", a.operate, nil, nil))
		}},
		{"Raft with a master certificate from another CA", func() error {
			return rawRaft(leader.Raft, a.tlsConfig(a.rogue, true))
		}},
		{"Raft with the cluster's worker certificate", func() error {
			return rawRaft(leader.Raft, a.tlsConfig(a.worker, true))
		}},
		{"Raft with TLS but no certificate", func() error {
			return rawRaft(leader.Raft, a.tlsConfig(pki.Files{}, true))
		}},
		{"worker certificate forwarding as a master", func() error {
			// The header counts from a master only; from a worker it is
			// ignored, and the request is the worker's own, which may
			// not submit. TestForgedForwardingIsBounded checks that a
			// forged one stays bounded.
			s, b, err := request(a.tlsConfig(a.worker, false), "POST", "https://"+follower.HTTP+"/v1/drivers", "",
				strings.NewReader(valid), map[string]string{"X-Drover-Forwarded": "m1"})
			return wantStatus(s, b, err, http.StatusUnauthorized)
		}},
		{"worker certificate submitting", func() error {
			s, b, err := request(a.tlsConfig(a.worker, false), "POST", base+"/v1/drivers", "", strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusUnauthorized, http.StatusForbidden)
		}},
		{"worker certificate reading", func() error {
			s, b, err := request(a.tlsConfig(a.worker, false), "GET", base+"/v1/drivers", "", nil, nil)
			return wantStatus(s, b, err, http.StatusUnauthorized, http.StatusForbidden)
		}},
		{"worker without a certificate to a worker", func() error {
			return wantHandshakeRefused(request(secure, "GET", "https://"+wk.HTTP+"/v1/health", a.operate, nil, nil))
		}},
		{"worker certificate to a worker", func() error {
			cfg := a.tlsConfig(a.worker, true)
			return wantHandshakeRefused(request(cfg, "GET", "https://"+wk.HTTP+"/v1/drivers/"+running+"/logs", "", nil, nil))
		}},
		{"no token", func() error {
			s, b, err := request(secure, "POST", base+"/v1/drivers", "", strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusUnauthorized)
		}},
		{"no token on a follower", func() error {
			s, b, err := request(secure, "POST", "https://"+follower.HTTP+"/v1/drivers", "", strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusUnauthorized)
		}},
		{"no token reading", func() error {
			s, b, err := request(secure, "GET", base+"/v1/state", "", nil, nil)
			return wantStatus(s, b, err, http.StatusUnauthorized)
		}},
		{"wrong token", func() error {
			s, b, err := request(secure, "POST", base+"/v1/drivers", devsecrets.RandomKey(), strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"truncated token", func() error {
			s, b, err := request(secure, "POST", base+"/v1/drivers", a.submit[:len(a.submit)-1], strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"token as Basic credentials", func() error {
			s, b, err := request(secure, "POST", base+"/v1/drivers", "", strings.NewReader(valid), map[string]string{"Authorization": "Basic " + a.submit})
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"submit token registering a worker", func() error {
			s, b, err := request(secure, "POST", base+"/v1/workers/register", a.submit,
				strings.NewReader(`{"id":"w9","instance":"x","http_addr":"127.0.0.1:1","cores":64,"memory_mb":65536}`), nil)
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"driver token submitting a driver", func() error {
			s, b, err := request(secure, "POST", base+"/v1/drivers", otherDriverToken, strings.NewReader(valid), nil)
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"driver token registering another driver's app", func() error {
			s, b, err := request(secure, "POST", base+"/v1/apps", otherDriverToken, strings.NewReader(appBody(running)), nil)
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"forged driver token", func() error {
			s, b, err := request(secure, "POST", base+"/v1/apps", forged, strings.NewReader(appBody(running)), nil)
			return wantStatus(s, b, err, http.StatusForbidden)
		}},
		{"../ in a driver ID", func() error {
			s, b, err := request(secure, "GET", base+"/v1/drivers/..%2F..%2Fsecrets%2F"+secretFile+"/logs", a.operate, nil, nil)
			return notLeaked(a, wantStatus(s, b, err, http.StatusBadRequest), b)
		}},
		{"absolute path as a driver ID", func() error {
			s, b, err := request(secure, "GET", base+"/v1/drivers/%2Fetc%2Fpasswd/logs", a.operate, nil, nil)
			return notLeaked(a, wantStatus(s, b, err, http.StatusBadRequest), b)
		}},
		{"../ in a log name", func() error {
			s, b, err := request(secure, "GET", base+"/v1/drivers/"+running+"/logs?stream=..%2F..%2F..%2Fsecrets%2F"+secretFile, a.operate, nil, nil)
			return notLeaked(a, wantStatus(s, b, err, http.StatusBadRequest), b)
		}},
		{"absolute log name", func() error {
			s, b, err := request(secure, "GET", base+"/v1/drivers/"+running+"/logs?stream=%2Fetc%2Fpasswd", a.operate, nil, nil)
			return notLeaked(a, wantStatus(s, b, err, http.StatusBadRequest), b)
		}},
		{"../ in an app ID", func() error {
			s, b, err := request(secure, "GET", base+"/v1/apps/..%2F..%2Fsecrets/executors/0/logs", a.operate, nil, nil)
			return notLeaked(a, wantStatus(s, b, err, http.StatusBadRequest), b)
		}},
		{"../ straight to a worker, as a master", func() error {
			cfg := a.tlsConfig(a.master, true)
			for _, path := range []string{
				"/v1/drivers/..%2F..%2Fsecrets%2F" + secretFile + "/logs",
				"/v1/drivers/" + running + "/logs?stream=..%2F..%2F..%2Fsecrets%2F" + secretFile,
				"/v1/apps/..%2Fsecrets/executors/0/logs",
				"/v1/apps/app-20200101000000-1/executors/..%2F..%2F..%2Fsecrets/logs",
			} {
				s, b, err := request(cfg, "GET", "https://"+wk.HTTP+path, "", nil, nil)
				if err := notLeaked(a, wantStatus(s, b, err, http.StatusBadRequest), b); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			return nil
		}},
		{"100 MiB body", func() error { return hugeBody(base+"/v1/drivers", secure, a.submit) }},
		{"100 MiB body without a token", func() error { return hugeBody(base+"/v1/drivers", secure, "") }},
		{"gossip with the wrong key", func() error { return rogueGossip(c, leader, []byte(strings.Repeat("k", 32))) }},
		{"gossip with no key", func() error { return rogueGossip(c, leader, nil) }},
		{"refused callers keeping their connections", func() error { return refusedKeepAlive(leader.HTTP, secure) }},
		{"10,000 slow connections", func() error { return slowloris(t, c, leader, secure, a.operate) }},
	}
	before := stateHash(t, leader)
	for _, at := range attacks {
		if err := at.do(); err != nil {
			t.Errorf("%s: not refused: %v", at.name, err)
		}
		if after := stateHash(t, leader); after != before {
			t.Fatalf("%s changed the tables", at.name)
		}
	}
	// The worker the gossip attacks impersonated is still ALIVE and its
	// driver still on its first attempt.
	st, err := testcluster.State(context.Background(), leader)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Workers {
		if w.State != model.WorkerAlive {
			t.Errorf("worker %s is %s after the attacks", w.ID, w.State)
		}
	}
	d := c.WaitDriver(running, 5*time.Second, "RUNNING", isState(model.DriverRunning))
	if d.Attempt != 1 {
		t.Errorf("driver %s is on attempt %d after the attacks", running, d.Attempt)
	}
	// A real driver token was handed out (the driver runs); none of the
	// secrets reached a log.
	secrets := map[string]string{"operator token": a.operate, "submit token": a.submit,
		"gossip key": readToken(t, c.Secrets.GossipKey), "driver token": guard.DriverToken(running, 1)}
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for what, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds the %s", l, what)
			}
		}
	}
}

// nodeFiles are the TLS files of node id of role in a cluster's secrets,
// issued on first use.
func nodeFiles(t *testing.T, s *devsecrets.Secrets, role pki.Role, id string) pki.Files {
	t.Helper()
	f, err := s.Node(role, id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// notLeaked adds to err when body holds a secret's bytes.
func notLeaked(a *attacker, err error, body string) error {
	if strings.Contains(body, a.operate) || strings.Contains(body, a.submit) || strings.Contains(body, "root:") {
		return fmt.Errorf("answer leaks a file: %q", body)
	}
	return err
}

// rawRaft connects to a Raft port (over TLS when cfg is set), sends bytes
// that would start an AppendEntries RPC, and expects the master to drop
// the connection without an answer.
func rawRaft(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	var conn net.Conn
	var err error
	if cfg != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, cfg)
		if err != nil {
			return nil // handshake refused
		}
	} else if conn, err = d.Dial("tcp", addr); err != nil {
		return fmt.Errorf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	_, _ = conn.Write([]byte{0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 9})
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("connection still open after 15s")
	}
	if err == nil && n > 0 {
		return fmt.Errorf("got an answer: %q", buf[:n])
	}
	return nil
}

// countingReader yields n bytes of a JSON string and counts what was read.
// The transport may still be reading it after the answer came back.
type countingReader struct {
	n    int64
	read atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	done := r.read.Load()
	if done >= r.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n-done)
	for i := range p[:k] {
		p[i] = 'x'
	}
	if done == 0 {
		copy(p, `{"token":"`)
	}
	r.read.Add(k)
	return int(k), nil
}

// hugeBody posts a 100 MiB body and expects 413 (or 401 without a token)
// or a connection the server closed, having read only a small part of it.
func hugeBody(url string, cfg *tls.Config, token string) error {
	body := &countingReader{n: 100 << 20}
	s, b, err := request(cfg, "POST", url, token, body, nil)
	if err == nil && s != http.StatusRequestEntityTooLarge && s != http.StatusUnauthorized {
		return fmt.Errorf("status %d (%s), want 413 or 401", s, strings.TrimSpace(b))
	}
	if n := body.read.Load(); n > 16<<20 {
		return fmt.Errorf("the master read %d MiB of the body before refusing it", n>>20)
	}
	return nil
}

// rogueGossip starts a memberlist member named as the cluster's worker w1,
// with key (nil: none), and tries to join the leader's gossip port, then
// announces that it leaves. The join must fail; the worker must stay ALIVE
// for the masters through their worker timeout, checked by the caller.
func rogueGossip(c *testcluster.Cluster, leader *testcluster.Node, key []byte) error {
	ml, err := c.GossipMember(gossip.NodeName(gossip.RoleWorker, c.Workers[0].ID), nil, key)
	if err != nil {
		return err
	}
	defer ml.Shutdown()
	n, err := ml.Join([]string{leader.Gossip})
	if err == nil || n > 0 {
		_ = ml.Leave(time.Second)
		return fmt.Errorf("joined %d members", n)
	}
	_ = ml.Leave(time.Second)
	// The masters' worker timeout is 1s: were the leave believed, the
	// worker would be lost by then.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		st, err := testcluster.State(context.Background(), leader)
		if err != nil {
			return err
		}
		for _, w := range st.Workers {
			if w.ID == c.Workers[0].ID && w.State != model.WorkerAlive {
				return fmt.Errorf("worker %s became %s", w.ID, w.State)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// slowloris opens 10,000 connections to the leader's API from ten loopback
// addresses and sends nothing on them. Each address may hold 512 (the
// default --max-conns-per-client), so the rest are closed at once; the
// held ones are closed when the TLS handshake times out. Meanwhile a
// legitimate client reads as usual.
func slowloris(t *testing.T, c *testcluster.Cluster, leader *testcluster.Node, cfg *tls.Config, token string) error {
	const total, sources = 10000, 10
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < total+1000 {
		t.Logf("skipping the slow-connection attack: the open-file limit is %d, want %d", lim.Cur, total+1000)
		return nil
	}
	conns := make([]net.Conn, 0, total)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var dialErrs atomic.Int64
	sem := make(chan struct{}, 256)
	start := time.Now()
	for i := range total {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.9.%d", 1+i%sources))}}
			conn, err := d.Dial("tcp", leader.HTTP)
			if err != nil {
				dialErrs.Add(1)
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	t.Logf("slow connections: %d open, %d dials failed, in %s", len(conns), dialErrs.Load(), time.Since(start).Round(time.Millisecond))

	// Beyond 512 per address the master closes them as they come.
	closedEarly := countClosed(conns, time.Second)
	t.Logf("slow connections closed at once by the per-client bound: %d", closedEarly)
	if want := total - sources*512; closedEarly < want {
		return fmt.Errorf("only %d connections were closed at once, want at least %d (512 per client address)", closedEarly, want)
	}

	// A legitimate client is served while they are held.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := c.Client()
	t0 := time.Now()
	if _, err := cl.Drivers(ctx); err != nil {
		return fmt.Errorf("a legitimate read failed during the attack: %v", err)
	}
	t.Logf("a legitimate read during the attack took %s", time.Since(t0).Round(time.Millisecond))
	s, b, err := request(cfg, "GET", "https://"+leader.HTTP+"/v1/state", token, nil, nil)
	if err := wantStatus(s, b, err, http.StatusOK); err != nil {
		return fmt.Errorf("a legitimate state read during the attack: %v", err)
	}

	// Every attacking connection is closed by the master within the
	// handshake timeout (5s) plus slack.
	if open := len(conns) - countClosed(conns, 10*time.Second); open > 0 {
		return fmt.Errorf("%d of %d slow connections still open after %s", open, len(conns), time.Since(start).Round(time.Second))
	}
	t.Logf("all slow connections closed by the master %s after the attack began", time.Since(start).Round(time.Millisecond))
	return nil
}

// refusedKeepAlive sends an unauthenticated request on each of 50 TLS
// connections and expects the master to close each after its 401, so that
// refused callers cannot hold idle connections.
func refusedKeepAlive(addr string, cfg *tls.Config) error {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 50 {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		conns = append(conns, conn)
		if _, err := io.WriteString(conn, "GET /v1/state HTTP/1.1\r\nHost: drover\r\n\r\n"); err != nil {
			return err
		}
	}
	for _, conn := range conns {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("status %d, want 401", resp.StatusCode)
		}
	}
	if open := len(conns) - countClosed(conns, 5*time.Second); open > 0 {
		return fmt.Errorf("%d of %d refused connections were kept open", open, len(conns))
	}
	return nil
}

// countClosed waits up to wait for each connection to be closed by its
// peer, all at once, and returns how many were.
func countClosed(conns []net.Conn, wait time.Duration) int {
	var closed atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(wait)
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(deadline)
			var buf [1]byte
			_, err := conn.Read(buf[:])
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(closed.Load())
}

// TestClosedByDefault: a master or worker with neither TLS nor a token
// refuses an address other than loopback, in one line, unless --insecure;
// on loopback it starts and warns.
func TestClosedByDefault(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"master", "--id", "m1", "--data-dir", filepath.Join(dir, "m"), "--bind", "0.0.0.0", "--peers", "m1=127.0.0.1:1"},
		{"worker", "--id", "w1", "--work-dir", filepath.Join(dir, "w"), "--bind", "192.0.2.1", "--masters", "127.0.0.1:1"},
	} {
		_, stderr, code := runDrover(t, nil, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || len(lines) != 1 ||
			!strings.Contains(lines[0], "refusing") || !strings.Contains(lines[0], "--insecure") {
			t.Errorf("drover %s --bind %s: exit %d, stderr %q; want exit 1 and one line naming --insecure",
				args[0], args[6], code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "m", "raft.db")); err == nil {
			t.Errorf("a refused master created its Raft store")
		}
	}
	// On loopback the cluster starts, and each node says it is open.
	c := testcluster.New(t, testcluster.Options{Masters: 1, Workers: 1})
	for _, n := range []*testcluster.Node{c.Masters[0], c.Workers[0]} {
		b, err := os.ReadFile(filepath.Join(c.Dir, n.ID+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("no TLS and no tokens")) {
			t.Errorf("%s on loopback did not warn that it runs open", n.ID)
		}
	}
}

// TestSecuredNodesNeedAGossipKey: a master or a worker with tokens or TLS
// and no gossip key refuses to start, exit 1, in one line that says how to
// make one, before it writes anything; --insecure does not waive it off
// loopback. On a loopback address --insecure does, and the node says so.
func TestSecuredNodesNeedAGossipKey(t *testing.T) {
	dir := t.TempDir()
	sec, err := devsecrets.Make(filepath.Join(dir, "secrets"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	token := []string{"--node-token-file", sec.NodeToken}
	// Masters with tokens and no TLS also need their raft key.
	masterToken := []string{"--operator-token-file", sec.OperatorToken, "--node-token-file", sec.NodeToken, "--raft-key-file", sec.RaftKey}
	tlsFiles := func(role pki.Role, id string) []string {
		f, err := sec.Node(role, id)
		if err != nil {
			t.Fatal(err)
		}
		return []string{"--tls-ca", sec.CA, "--tls-cert", f.Cert, "--tls-key", f.Key}
	}
	masterAt := func(bind string, extra ...string) []string {
		return append([]string{"master", "--id", "m1", "--data-dir", filepath.Join(dir, "m"), "--bind", bind, "--peers", "m1=" + bind + ":7101"}, extra...)
	}
	workerAt := func(bind string, extra ...string) []string {
		return append([]string{"worker", "--id", "w1", "--work-dir", filepath.Join(dir, "w"), "--bind", bind, "--masters", "127.0.0.1:1"}, extra...)
	}
	for _, c := range []struct {
		name     string
		args     []string
		loopback bool
	}{
		{"master with tokens", masterAt("127.0.0.1", masterToken...), true},
		{"master with TLS", masterAt("127.0.0.1", tlsFiles(pki.RoleMaster, "m1")...), true},
		{"worker with the node token", workerAt("127.0.0.1", token...), true},
		{"worker with TLS", workerAt("127.0.0.1", tlsFiles(pki.RoleWorker, "w1")...), true},
		{"master with tokens and --insecure off loopback", masterAt("192.0.2.1", append(masterToken, "--insecure")...), false},
		{"worker with the node token and --insecure off loopback", workerAt("192.0.2.1", append(token, "--insecure")...), false},
	} {
		_, stderr, code := runDrover(t, nil, c.args...)
		line := strings.TrimSpace(stderr)
		if code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, "no gossip key") ||
			!strings.Contains(line, "drover keygen > gossip.key") || !strings.Contains(line, "--gossip-key-file") ||
			strings.Contains(line, "--insecure") != c.loopback {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and one line on the gossip key (offering --insecure: %v)", c.name, code, stderr, c.loopback)
		}
		for _, f := range []string{filepath.Join(dir, "m", "raft.db"), filepath.Join(dir, "w")} {
			if _, err := os.Stat(f); err == nil {
				t.Fatalf("%s: a refused node created %s", c.name, f)
			}
		}
	}

	// On loopback, --insecure lets a cluster with tokens run without a
	// key, and each node says what that opens.
	cl := testcluster.New(t, testcluster.Options{Masters: 1, Workers: 1,
		MasterArgs: append(masterToken, "--submit-token-file", sec.SubmitToken, "--open-reads", "--insecure"),
		WorkerArgs: append(token, "--insecure")})
	for _, n := range []*testcluster.Node{cl.Masters[0], cl.Workers[0]} {
		if !strings.Contains(n.Log(), "no gossip key on a loopback address") {
			t.Errorf("%s ran without a gossip key and did not say so", n.ID)
		}
	}
}

// TestSecuredClusterRunsDriversAndApps: on a secured cluster the CLI with
// the CA and the submit token submits and reads logs; the CLI without the
// CA or the token is refused with one line, exit 1. After the leader is
// SIGKILLed and restarted, the word count's driver registers its app with
// the token its worker hands it and finishes with executors, and every
// master, the restarted one too, ends with the same tables.
func TestSecuredClusterRunsDriversAndApps(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2, Secure: true})
	env := c.ClientEnv()
	run := func(env []string, args ...string) (string, string, int) {
		return runDrover(t, env, append([]string{"client", "--timeout", "20s"}, args...)...)
	}
	out, errOut, code := run(env, "submit", "--wait", "--", "/bin/echo", "hello")
	if code != 0 {
		t.Fatalf("secured submit: exit %d, %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := lines[len(lines)-1]
	if out, errOut, code := run(env, "logs", id); code != 0 || out != "hello\n" {
		t.Fatalf("logs: exit %d, %q, %s", code, out, errOut)
	}
	for _, tc := range []struct {
		name string
		drop string
	}{{"without the CA", "DROVER_CACERT="}, {"without a token", "DROVER_TOKEN_FILE="}} {
		_, errOut, code := run(append(env, tc.drop), "--timeout", "5s", "list")
		if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("list %s: exit %d, stderr %q; want exit 1 and one line", tc.name, code, errOut)
		}
	}

	// A leader SIGKILLed and restarted with the same credentials: a new
	// leader takes over over mutual TLS, and the old one rejoins and
	// catches up.
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}

	// The word count registers an app with its driver token.
	wc := buildWordcount(t)
	input := sharedDir(t)
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(input, fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat("alpha beta gamma beta\n", 50+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = run(env, "submit", "--wait", "--", wc, "--executors", "2", input)
	if code != 0 {
		t.Fatalf("word count on the secured cluster: exit %d, %s", code, errOut)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	id = lines[len(lines)-1]
	logs, _, _ := run(env, "logs", "--stderr", id)
	if !strings.Contains(logs, "digest=") {
		t.Fatalf("word count did not finish its count:\n%s", logs)
	}
	var apps []api.AppStatus
	appsOut, _, _ := run(env, "apps", "--json")
	if err := json.Unmarshal([]byte(appsOut), &apps); err != nil || len(apps) != 1 || apps[0].State != model.AppFinished || len(apps[0].Executors) == 0 {
		t.Fatalf("apps after the word count (want one FINISHED with executors): %v %s", err, appsOut)
	}
	waitSameTables(t, c, c.Masters...)
}

// TestTokensWithoutTLS: masters with tokens and no TLS run a worker that
// holds the node token alone, take submissions with the submit token and
// proxy logs from the worker with the node token. The node token may not
// submit, read drivers or the state, or do an operator's calls (403); an
// older worker's operator token still does worker traffic, with a line in
// the leader's log once per worker; a worker given the operator token
// refuses to start, naming the node token.
func TestTokensWithoutTLS(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, TokensOnly: true})
	opts, err := client.SecureOptions("", "", "", c.Secrets.SubmitToken)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(strings.Split(c.MasterAddrs, ","), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cl.Submit(ctx, api.SubmitRequest{Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"/bin/echo", "hi"}, Cores: 1, MemoryMB: 64}})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitDriver(res.DriverID, 20*time.Second, "FINISHED", isState(model.DriverFinished))
	out, _, err := cl.Logs(ctx, res.DriverID, false, 0, 0)
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("logs through the master: %q, %v", out, err)
	}

	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	node, operator := readToken(t, c.Secrets.NodeToken), readToken(t, c.Secrets.OperatorToken)
	base := "http://" + leader.HTTP
	before := stateHash(t, leader)
	for _, call := range []struct{ method, path, body string }{
		{http.MethodPost, api.PathDrivers, `{"token":"node-1","argv":["true"],"cores":1,"memory_mb":64}`},
		{http.MethodGet, api.PathDrivers, ""},
		{http.MethodGet, api.DriverPath(res.DriverID, ""), ""},
		{http.MethodGet, api.DriverPath(res.DriverID, "/logs"), ""},
		{http.MethodGet, api.PathState, ""},
		{http.MethodGet, api.PathRaftPeers, ""},
		{http.MethodPost, api.PathClearCompleted, ""},
		{http.MethodGet, api.PathSnapshot, ""},
	} {
		s, b, err := request(nil, call.method, base+call.path, node, strings.NewReader(call.body), nil)
		if err := wantStatus(s, b, err, http.StatusForbidden); err != nil {
			t.Errorf("node token, %s %s: %v", call.method, call.path, err)
		}
	}
	if after := stateHash(t, leader); after != before {
		t.Fatal("the node token changed the tables")
	}
	anon, err := client.New(strings.Split(c.MasterAddrs, ","), client.Options{RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	if _, err := anon.Submit(ctx, api.SubmitRequest{Token: "t2", DriverSpec: model.DriverSpec{Argv: []string{"true"}, Cores: 1, MemoryMB: 64}}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Fatalf("anonymous submit: %v, want 401", err)
	}

	// An older worker's operator token: heard, and noticed once.
	for range 3 {
		s, b, err := request(nil, http.MethodPost, base+api.WorkerPath("w-old", "/heartbeat"), operator, strings.NewReader(`{"instance":"x","running":[]}`), nil)
		if err := wantStatus(s, b, err, http.StatusOK); err != nil {
			t.Fatalf("an older worker's heartbeat with the operator token: %v", err)
		}
	}
	if n := strings.Count(leader.Log(), "worker w-old presents the operator token"); n != 1 {
		t.Errorf("the leader noticed the operator token %d times, want once", n)
	}

	// An address no interface has: a worker that took the token would
	// fail to listen there rather than run.
	_, stderr, code := runDrover(t, nil, "worker", "--id", "w9", "--masters", c.MasterAddrs, "--work-dir", filepath.Join(t.TempDir(), "w9"),
		"--bind", "192.0.2.1", "--operator-token-file", c.Secrets.OperatorToken)
	if lines := refusals(stderr); code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "--node-token-file") {
		t.Errorf("a worker given the operator token: exit %d, stderr %q; want exit 1 and one line naming --node-token-file", code, stderr)
	}
}

// refusals are the lines of a command's stderr other than its warnings
// (a variable of the test's environment that no flag reads, say).
func refusals(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "drover: warning: ") {
			out = append(out, l)
		}
	}
	return out
}

// TestWorkerWithWrongGossipKeyGetsNoWork: a worker with a valid worker
// certificate but the wrong gossip key cannot join the pool, so the leader
// refuses its registration and it never runs anything; its log says why.
func TestWorkerWithWrongGossipKeyGetsNoWork(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, Secure: true})
	bad := filepath.Join(t.TempDir(), "wrong.key")
	if err := os.WriteFile(bad, []byte(devsecrets.RandomKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	w := c.AddWorker("w-wrong-key", "--gossip-key-file", bad)
	log := filepath.Join(c.Dir, w.ID+".log")
	waitFor(t, 30*time.Second, "the worker says why it cannot register", func() bool {
		b, _ := os.ReadFile(log)
		return bytes.Contains(b, []byte("the leader does not see this worker in its gossip pool"))
	})
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := testcluster.State(context.Background(), leader)
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range st.Workers {
		if wk.ID == w.ID {
			t.Fatalf("the worker with the wrong gossip key is in the tables as %s", wk.State)
		}
	}
	// The leader, which hears it ask, names it in its split report.
	waitFor(t, 30*time.Second, "the leader reports the worker as missing from its pool", func() bool {
		st, err := testcluster.State(context.Background(), leader)
		return err == nil && slices.ContainsFunc(st.PoolSplit, func(m api.PoolMember) bool { return m.Role == "worker" && m.ID == w.ID })
	})
}
