package master_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// openStream opens GET /v1/events on addr from 127.0.0.1 and returns its
// status and the refusal's body, closing the stream at once.
func openStream(t *testing.T, addr string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "", resp.Header
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// A client holds at most --max-event-streams-per-client event streams on
// one master; the next is refused with 429, Retry-After and the bound.
func TestEventStreamsPerClientAreBounded(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.MaxEventStreamsPerClient = 3 })
	addr := c.Leader().HTTP()
	for range 3 {
		resp, err := http.Get("http://" + addr + "/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a stream within the bound: %s", resp.Status)
		}
	}
	status, body, header := openStream(t, addr)
	var e api.Error
	if status != http.StatusTooManyRequests || header.Get("Retry-After") == "" || json.Unmarshal([]byte(body), &e) != nil ||
		e.Code != api.CodeTooManyRequests || !strings.Contains(e.Error, "3 event streams open here, the bound of --max-event-streams-per-client") {
		t.Fatalf("a fourth stream: %d %s (Retry-After %q), want 429 naming the bound", status, body, header.Get("Retry-After"))
	}
}

// A reader of the event stream that stops reading is cut off within
// --event-write-timeout of the write that waits for it, and its slot is
// free again: on the leader, and on a follower, which serves the stream
// from its own events. Resuming from index 0, the reader is sent every
// change of an app whose environment is 0.9 MB, some 9 MB in all, far
// more than its connection's buffers hold.
func TestStalledEventReaderIsCutOff(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.EventWriteTimeout = time.Second
		cfg.MaxEventStreamsPerClient = 1
		cfg.AppTimeout = time.Hour
		cfg.MaxProgramSize = 1 << 20
		// Entries of a megabyte, replicated under the race detector:
		// the leader must stay, on a loaded machine too.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
	})
	leader, follower := c.Leader(), c.Followers()[0]
	cl, ctx := c.Client(), c.Context()
	env := map[string]string{}
	for i := range 14000 {
		env[fmt.Sprintf("V%05d", i)] = strings.Repeat("x", 56)
	}
	var reg api.RegisterAppResponse
	if err := cl.Do(ctx, http.MethodPost, api.PathApps, api.RegisterAppRequest{
		Token: "large", CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"/bin/true"}, Env: env,
	}, &reg); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := cl.Do(ctx, http.MethodPost, api.AppPath(reg.AppID, "/executors"), api.RequestExecutorsRequest{Total: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []*mastertest.Node{leader, follower} {
		conn := stallStream(t, n.HTTP())
		if status, body, _ := openStream(t, n.HTTP()); status != http.StatusTooManyRequests {
			t.Fatalf("%s: a second stream while the stalled one holds the only slot: %d %s", n.ID, status, body)
		}
		freed := time.Now().Add(15 * time.Second)
		for {
			status, body, _ := openStream(t, n.HTTP())
			if status == http.StatusOK {
				break
			}
			if status != http.StatusTooManyRequests || time.Now().After(freed) {
				t.Fatalf("%s: the stalled stream still holds its slot (%d %s)", n.ID, status, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The master closed the connection: what it sent before ends.
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%s: the stalled stream's connection is still open: %v", n.ID, err)
		}
	}
}

// stallStream opens GET /v1/events?index=0 on addr from 127.0.0.1 with a
// receive buffer as small as the kernel allows, reads the status line to
// know the stream holds its slot, and reads no more.
func stallStream(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)},
		Control: func(_, _ string, rc syscall.RawConn) error {
			var err error
			if cerr := rc.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); cerr != nil {
				return cerr
			}
			return err
		},
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET /v1/events?index=0 HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("the stream to stall: %q, %v", status, err)
	}
	return conn
}

// A blocking read takes one of its client's --max-blocking-reads-per-client
// slots on the master it reaches first, and none on the leader a follower
// forwards it to: with a bound of 2, three reads at once on a follower and
// three on the leader make one refusal on each, naming the bound, while
// the four others, two of them forwarded, wait for the row's change.
func TestBlockingReadsPerClientAreCountedOnce(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.MaxBlockingReadsPerClient = 2
		// A change of leader ends the reads a follower forwarded: the
		// leader must stay, on a loaded machine too.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
	})
	leader, follower := c.Leader(), c.Followers()[0]
	cl, ctx := c.Client(), c.Context()
	res, err := cl.Submit(ctx, submitReq())
	if err != nil {
		t.Fatal(err)
	}
	_, index, err := cl.WaitDriver(ctx, res.DriverID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		body   string
		state  model.DriverState
	}
	answers := make(chan answer, 6)
	path := fmt.Sprintf("%s?index=%d&wait=1m", api.DriverPath(res.DriverID, ""), index)
	for _, n := range []*mastertest.Node{follower, follower, follower, leader, leader, leader} {
		go func() {
			a := answer{body: "no answer"}
			if resp, err := http.Get("http://" + n.HTTP() + path); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var d model.Driver
				_ = json.Unmarshal(b, &d)
				a = answer{resp.StatusCode, string(b), d.State}
			}
			answers <- a
		}()
	}
	next := func() answer {
		select {
		case a := <-answers:
			return a
		case <-ctx.Done():
			t.Fatal("the blocking reads did not answer")
			return answer{}
		}
	}
	for range 2 {
		a := next()
		var e api.Error
		if a.status != http.StatusTooManyRequests || json.Unmarshal([]byte(a.body), &e) != nil || !strings.Contains(e.Error, "2 blocking reads waiting here, the bound of --max-blocking-reads-per-client") {
			t.Fatalf("a blocking read answered before the row changed: %d %s; want only the third on each master, refused naming the bound", a.status, a.body)
		}
	}
	if err := cl.Kill(ctx, res.DriverID); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if a := next(); a.status != http.StatusOK || a.state != model.DriverKilled {
			t.Fatalf("a held blocking read: %d %s, want 200 with the driver KILLED", a.status, a.body)
		}
	}
}
