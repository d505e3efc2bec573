package systest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// screenshotEnv names a file (relative to the repository root, or
// absolute) where TestWebUIInChromium saves a screenshot of the overview;
// docs/ui-overview.png is made with
//
//	DROVER_UI_SCREENSHOT=docs/ui-overview.png go test ./systest -run TestWebUIInChromium
const screenshotEnv = "DROVER_UI_SCREENSHOT"

// chromiumTimeout bounds one headless Chromium run.
const chromiumTimeout = 60 * time.Second

// chromium runs headless Chromium once with args after the flags that keep
// it from touching anything but the page: no sandbox (tests may run as
// root), no GPU, no network of its own, a throwaway profile. It returns
// what Chromium printed on stdout.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(),
	}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Chromium forks helpers (zygote, renderer, GPU): run it in its own
	// process group, and kill the whole group on timeout and at cleanup,
	// so no helper outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err := cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if ctx.Err() != nil {
		t.Fatalf("chromium %q did not finish within %s; stderr:\n%s", args, chromiumTimeout, tail(stderr.String(), 2000))
	}
	if err != nil {
		t.Fatalf("chromium %q: %v; stderr:\n%s", args, err, tail(stderr.String(), 2000))
	}
	return stdout.String()
}

func tail(s string, n int) string { return s[max(len(s)-n, 0):] }

// page is a DOM as Chromium dumped it after loading a URL.
type page struct {
	url  string
	root *html.Node
}

// load opens url in headless Chromium and parses the DOM it dumps.
func load(t *testing.T, bin, url string) page {
	t.Helper()
	dom := chromium(t, bin, "--dump-dom", url)
	root, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return page{url, root}
}

// text is the page's visible text, spaces collapsed, with a space between
// cells.
func (p page) text() string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "style" || n.Data == "head") {
			return
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode {
			b.WriteString(" ")
		}
	}
	walk(p.root)
	return strings.Join(strings.Fields(b.String()), " ")
}

// links maps the id of every <a> that has one (or else its href) to its
// href.
func (p page) links() map[string]string {
	out := map[string]string{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" {
			var id, href string
			for _, a := range n.Attr {
				switch a.Key {
				case "id":
					id = a.Val
				case "href":
					href = a.Val
				}
			}
			if id == "" {
				id = href
			}
			out[id] = href
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(p.root)
	return out
}

func (p page) has(t *testing.T, want ...string) {
	t.Helper()
	text := p.text()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s shows %q, without %q", p.url, tail(text, 3000), w)
		}
	}
}

func (p page) linksTo(t *testing.T, hrefs ...string) {
	t.Helper()
	ls := p.links()
	for _, h := range hrefs {
		if _, ok := ls[h]; !ok {
			t.Fatalf("%s has no link to %q; it has %q", p.url, h, ls)
		}
	}
}

// leaderPage loads path from the leader and returns it with the leader,
// trying again when leadership moved between finding the leader and
// loading the page (a loaded machine sees elections).
func leaderPage(t *testing.T, c *testcluster.Cluster, bin, path string) (page, *testcluster.Node) {
	t.Helper()
	for try := 1; ; try++ {
		l, err := c.Leader(20 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p := load(t, bin, "http://"+l.HTTP+path)
		if strings.Contains(p.text(), "master "+l.ID+" Leader") || try == 5 {
			return p, l
		}
	}
}

// followerOf returns the leader and a follower whose own view has driver
// id finished and knows the leader's address: a follower's pages show its
// own tables.
func followerOf(t *testing.T, c *testcluster.Cluster, id string) (leader, follower *testcluster.Node) {
	t.Helper()
	waitFor(t, 30*time.Second, "a follower that knows the leader and the driver", func() bool {
		l, err := c.Leader(5 * time.Second)
		if err != nil {
			return false
		}
		for _, m := range c.Masters {
			if m == l {
				continue
			}
			st, err := testcluster.State(context.Background(), m)
			if err != nil || st.Role != "Follower" || st.LeaderHTTP != l.HTTP {
				continue
			}
			for _, d := range st.Drivers {
				if d.ID == id && d.State == model.DriverFinished {
					leader, follower = l, m
					return true
				}
			}
		}
		return false
	})
	return leader, follower
}

// TestWebUIInChromium loads the web UI of a real cluster in headless
// Chromium: the overview on the leader and on a follower, a driver, its
// log, a worker and an application, and a 404; with $DROVER_UI_SCREENSHOT
// set it also saves a screenshot of the overview.
func TestWebUIInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium): the web UI is not checked in a browser")
	}
	c := testcluster.New(t, testcluster.Options{Workers: 1})
	shot := os.Getenv(screenshotEnv)

	id := submit(t, c, api.SubmitRequest{
		Name: "hello", DriverSpec: model.DriverSpec{
			Argv:     []string{"/bin/sh", "-c", "echo hello from the web UI test; echo a warning >&2"},
			Cores:    1,
			MemoryMB: 256,
		},
	})
	c.WaitDriver(id, 30*time.Second, "FINISHED", isState(model.DriverFinished))
	if shot != "" {
		// A livelier overview for the picture: a driver that runs on and
		// one that fails.
		submit(t, c, api.SubmitRequest{Name: "nightly-etl", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "600"}, Cores: 1, MemoryMB: 512, Supervise: true}})
		failed := submit(t, c, api.SubmitRequest{Name: "flaky", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", "exit 3"}, Cores: 1, MemoryMB: 256}})
		c.WaitDriver(failed, 30*time.Second, "FAILED", isState(model.DriverFailed))
	}
	// An application of no driver, registered from here, with one
	// executor that prints a line and waits.
	app := registerApp(t, c, client.AppSpec{
		Name: "wordcount", CoresPerExecutor: 1, MemoryPerExecutorMB: 512, Executors: 1,
		Argv: []string{"/bin/sh", "-c", "echo executor $DROVER_EXECUTOR_ID says hi; exec sleep 600"},
	})
	nextEvent(t, app, 30*time.Second, "executor running", kind(client.ExecutorRunning))
	appID := app.ID()

	leader, err := c.Leader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + leader.HTTP

	t.Run("overview on the leader", func(t *testing.T) {
		p, l := leaderPage(t, c, bin, "/")
		p.has(t, "Cluster overview", l.ID+" (Leader)", id, "hello", "FINISHED", "w1", "ALIVE", "/ 4", appID, "wordcount", "reloads every 5 s")
		p.linksTo(t, "/ui/drivers/"+id, "/ui/workers/w1", "/ui/apps/"+appID, "/?refresh=0")
	})

	t.Run("overview on a follower", func(t *testing.T) {
		for try := 1; ; try++ {
			l, f := followerOf(t, c, id)
			p := load(t, bin, "http://"+f.HTTP+"/?refresh=0")
			if cur, err := c.Leader(20 * time.Second); (err != nil || cur != l) && try < 5 {
				continue // an election in between: the page may name either
			}
			p.has(t, "This master's view (follower "+f.ID+")", "The leader is "+l.ID, id, "FINISHED", "paused")
			if got, want := p.links()["leader-link"], "http://"+l.HTTP+"/?refresh=0"; got != want {
				t.Fatalf("the follower links the leader as %q, want %q", got, want)
			}
			return
		}
	})

	t.Run("driver", func(t *testing.T) {
		p := load(t, bin, base+"/ui/drivers/"+id+"?refresh=0")
		p.has(t, "Driver "+id, "FINISHED", "Attempts (1)", "w1")
		logs := "/ui/drivers/" + id + "/logs?attempt=1&refresh=0&stream="
		p.linksTo(t, logs+"stdout", logs+"stderr", "/ui/workers/w1?refresh=0")

		out := load(t, bin, base+logs+"stdout")
		out.has(t, "stdout of "+id+" attempt 1", "hello from the web UI test")
		out.linksTo(t, "raw")
		if raw := out.links()["raw"]; raw != "/v1/drivers/"+id+"/logs?attempt=1&stale=true&stream=stdout" {
			t.Fatalf("the whole log is at %q", raw)
		}
		load(t, bin, base+logs+"stderr").has(t, "a warning")
		// A follower serves the driver from its own tables too.
		_, f := followerOf(t, c, id)
		load(t, bin, "http://"+f.HTTP+"/ui/drivers/"+id).has(t, id, "FINISHED")
	})

	t.Run("worker", func(t *testing.T) {
		p := load(t, bin, base+"/ui/workers/w1?refresh=0")
		p.has(t, "Worker w1", "ALIVE", "/ 4 used", id, appID)
		p.linksTo(t, "/ui/drivers/"+id+"?refresh=0", "/ui/apps/"+appID+"?refresh=0")
	})

	t.Run("app", func(t *testing.T) {
		p := load(t, bin, base+"/ui/apps/"+appID+"?refresh=0")
		p.has(t, "Application "+appID, "RUNNING", "Executors (1)", "w1")
		logs := "/ui/apps/" + appID + "/executors/0/logs?refresh=0&stream="
		p.linksTo(t, logs+"stdout", logs+"stderr")
		load(t, bin, base+logs+"stdout").has(t, "executor 0 says hi")
	})

	t.Run("not found", func(t *testing.T) {
		load(t, bin, base+"/ui/drivers/driver-20990101000000-9").has(t, "404 Not Found", "unknown driver")
		load(t, bin, base+"/ui/workers/nobody").has(t, "404 Not Found", "unknown worker")
		load(t, bin, base+"/ui/drivers/not-a-driver").has(t, "400 Bad Request", "is not a driver ID")
	})

	if shot != "" {
		if !filepath.IsAbs(shot) {
			// Tests run in tests/systest; the path is the repository's.
			shot = filepath.Join("..", "..", shot)
		}
		// Chromium writes the file itself; an absolute path keeps it from
		// guessing a directory.
		abs, err := filepath.Abs(shot)
		if err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(abs)
		_, l := leaderPage(t, c, bin, "/")
		chromium(t, bin, "--hide-scrollbars", "--window-size=1280,900", "--screenshot="+abs, "http://"+l.HTTP+"/")
		b, err := os.ReadFile(abs)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("no PNG at %s (%v)", abs, errors.Join(err, fmt.Errorf("%d bytes", len(b))))
		}
		t.Logf("screenshot of the overview: %s", abs)
	}
}
