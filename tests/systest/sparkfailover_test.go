package systest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/tests/testcluster"
)

// sparkSubmitTries is one submission as Spark's RestSubmissionClient
// makes it for spark://m1,m2,m3: one POST create to each master in turn,
// a master it cannot connect to skipped, until one answers success; each
// answer awaited 10 s at most, as Spark's readResponse does. It returns
// the submission ID and the answers that came before it.
func sparkSubmitTries(hc *http.Client, urls []string, body string) (string, []string) {
	var tried []string
	for _, u := range urls {
		resp, err := hc.Post(u+"/v1/submissions/create", "application/json", strings.NewReader(body))
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", u, err))
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out restsubmit.CreateSubmissionResponse
		if json.Unmarshal(b, &out) == nil && out.Success {
			return out.SubmissionID, tried
		}
		tried = append(tried, fmt.Sprintf("%s: %d %s", u, resp.StatusCode, b))
	}
	return "", tried
}

// readyzWatch polls url (a follower's readyz) every few milliseconds from
// the leader's death until it is ready again naming another leader than
// dead, or 10 s pass, and returns what it said: each answer that differs
// from the one before, as "STATUS MESSAGE".
func readyzWatch(hc *http.Client, url, dead string) []string {
	var seen []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		var out struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		// The silence it measures changes every poll: keep its words.
		msg := fmt.Sprintf("%d %s", resp.StatusCode, out.Message)
		if i := strings.Index(msg, " last spoke "); i >= 0 {
			msg = msg[:i] + " last spoke ..."
		}
		if len(seen) == 0 || seen[len(seen)-1] != msg {
			seen = append(seen, msg)
		}
		if resp.StatusCode == http.StatusOK && !strings.Contains(out.Message, "leader "+dead+".") {
			return seen
		}
		time.Sleep(5 * time.Millisecond)
	}
	return seen
}

// TestSparkSubmitRidesThroughLeaderKills: spark-submit's own pattern (each
// master once, in order) submits successfully right after the leader's
// SIGKILL, ten times out of ten, one driver per submission; and a
// follower's readyz is 503 from a moment after the kill, while Raft still
// names the dead leader, until a new leader is ready (never ready naming
// the dead one once it said not ready).
func TestSparkSubmitRidesThroughLeaderKills(t *testing.T) {
	const kills = 10
	c, rest := sparkRESTCluster(t, testcluster.Options{}, "/bin/true {{mainClass}}")
	var urls []string
	for _, m := range c.Masters {
		urls = append(urls, "http://"+rest[m.ID])
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ids := map[string]bool{}
	start := time.Now()
	for i := range kills {
		leader, err := c.Leader(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Every master follows this leader before it dies, so that the
		// two left are a quorum.
		waitFor(t, 30*time.Second, "every master to follow "+leader.ID, func() bool {
			for _, m := range c.Masters {
				st, err := testcluster.State(context.Background(), m)
				if err != nil || st.Leader != leader.ID {
					return false
				}
			}
			return true
		})
		watched := c.Follower(leader)
		ready := make(chan []string, 1)
		leader.Kill()
		go func() { ready <- readyzWatch(hc, "http://"+rest[watched.ID]+"/v1/submissions/readyz", leader.ID) }()

		id, tried := sparkSubmitTries(hc, urls, createJSON(fmt.Sprintf("kill-%d", i)))
		if id == "" || ids[id] {
			t.Fatalf("kill %d of %s: submission %q failed or repeated; answers: %q", i+1, leader.ID, id, tried)
		}
		ids[id] = true

		seen := <-ready
		notReady := -1
		for j, s := range seen {
			if !strings.HasPrefix(s, "200 ") {
				notReady = j
				break
			}
		}
		if notReady < 0 || seen[notReady] != fmt.Sprintf("503 Master %s is not ready: leader %s last spoke ...", watched.ID, leader.ID) {
			t.Fatalf("kill %d: readyz of %s said %q; want 503 first while its Raft still names the dead %s", i+1, watched.ID, seen, leader.ID)
		}
		for _, s := range seen[notReady:] {
			if strings.HasPrefix(s, "200 ") && strings.Contains(s, "leader "+leader.ID+".") {
				t.Fatalf("kill %d: readyz of %s said %q: ready naming the dead %s", i+1, watched.ID, seen, leader.ID)
			}
		}
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d leader kills, each followed at once by a Spark submission, in %s", kills, time.Since(start).Round(time.Second))

	// One driver per submission: no forwarding made two.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drivers, err := c.Client().Drivers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(drivers) != kills {
		t.Fatalf("%d drivers, want %d: %+v", len(drivers), kills, drivers)
	}
	for _, d := range drivers {
		if !ids[d.ID] {
			t.Fatalf("driver %s was not answered to any submission", d.ID)
		}
	}
}
