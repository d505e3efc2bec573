package systest

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/worker/unitdir"
)

// snoopScript is what a hostile program on a worker tries, saying what it
// managed: who it runs as, the secrets it can read ($SECRETS), its
// runner's environment, the files it can write ($PROTECTED), and what it
// may do (write its own directory, read its staged copy and the CA);
// then its whole environment, after a line "env:".
const snoopScript = `#!/bin/sh
echo "uid $(id -u) gid $(id -g)"
for f in $SECRETS; do
	if cat "$f" > /dev/null 2>&1; then echo "read $f"; else echo "cannot read $f"; fi
done
if cat /proc/$PPID/environ > /dev/null 2>&1; then echo "read its runner's environ"; else echo "cannot read its runner's environ"; fi
for f in $PROTECTED; do
	if (echo planted >> "$f") 2> /dev/null; then echo "wrote $f"; else echo "cannot write $f"; fi
done
echo mine > mine && cat mine
[ "$(stat -c %u snoop.sh)" = "$(id -u)" ] && echo "owns snoop.sh"
grep -q CERTIFICATE "$DROVER_CACERT" && echo "reads the CA"
echo env:
env
`

// TestProgramsSeeNoSecretOfTheirWorker: on a secured cluster (mutual TLS,
// tokens, gossip key; and with tokens alone, where the worker holds a
// token, which its runner reads uploads with) whose worker runs as root,
// a submitted program runs as nobody; it cannot read the cluster's keys,
// tokens and gossip key, the worker's record and lease, nor its runner's
// environment; it cannot write the artifact cache, its own spec, status
// or log files, nor another attempt's directory; its environment holds no
// secret of the worker's. It still stages an uploaded artifact (as its
// own), writes its directory, reads the CA (with TLS), and its output
// reaches drover client logs. A driver that names the node token or the
// worker's TLS key as a file:// artifact ends FAILED, saying that nobody
// may not read it, having staged and shown nothing.
func TestProgramsSeeNoSecretOfTheirWorker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a worker runs programs as another user only when it runs as root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	for _, opts := range []testcluster.Options{{Masters: 1, Workers: 1, Secure: true}, {Masters: 1, Workers: 1, TokensOnly: true}} {
		name := "tls"
		if opts.TokensOnly {
			name = "tokens"
		}
		t.Run(name, func(t *testing.T) { snoop(t, testcluster.New(t, opts), nobody) })
	}
}

// snoop runs snoopScript on c's worker and checks what it found.
func snoop(t *testing.T, c *testcluster.Cluster, nobody *user.User) {
	w := c.Workers[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	victim := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "600"}, Cores: 1, MemoryMB: 64}})
	c.WaitDriver(victim, 30*time.Second, "RUNNING", isState(model.DriverRunning))
	victimDir := filepath.Join(w.Dir, victim, "attempt-1")

	script := filepath.Join(t.TempDir(), "snoop.sh")
	if err := os.WriteFile(script, []byte(snoopScript), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := c.Client().Upload(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Secrets
	// The nodes' keys (each issued on a TLS cluster), the CA's, and every
	// token and key.
	keys, _ := filepath.Glob(filepath.Join(s.Dir, "*-key.pem"))
	tokens := []string{s.GossipKey, s.OperatorToken, s.SubmitToken, s.NodeToken, s.RaftKey}
	secrets := append(append(keys, tokens...), filepath.Join(w.Dir, "worker.db"), filepath.Join(w.Dir, "worker.lease"))
	protected := []string{filepath.Join(w.Dir, "cache", "sha256", a.Upload), filepath.Join(w.Dir, "cache", "sha256", "planted"),
		"../" + unitdir.SpecFile, "../" + unitdir.StatusFile, "../" + unitdir.LogFileName(unitdir.StdoutFile, 0), "../planted",
		filepath.Join(victimDir, unitdir.StatusFile), filepath.Join(victimDir, "planted"), filepath.Join(w.Dir, "planted")}
	id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./snoop.sh"}, Cores: 1, MemoryMB: 64, Artifacts: []model.Artifact{a}, Env: map[string]string{"SECRETS": strings.Join(secrets, " "), "PROTECTED": strings.Join(protected, " ")}}})
	d := c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	if d.State != model.DriverFinished {
		t.Fatalf("driver %s (%s), want FINISHED", d.State, d.Message)
	}

	out, errOut, code := runDrover(t, c.ClientEnv(), "client", "logs", id)
	if code != 0 {
		t.Fatalf("drover client logs: exit %d, %s", code, errOut)
	}
	said, env, ok := strings.Cut(out, "env:\n")
	if !ok {
		t.Fatalf("the program's output lacks its environment:\n%s", out)
	}
	want := []string{"uid " + nobody.Uid + " gid " + nobody.Gid}
	for _, f := range secrets {
		want = append(want, "cannot read "+f)
	}
	want = append(want, "cannot read its runner's environ")
	for _, f := range protected {
		want = append(want, "cannot write "+f)
	}
	want = append(want, "mine", "owns snoop.sh")
	if c.Scheme() == "https" {
		want = append(want, "reads the CA")
	}
	if got := strings.Split(strings.TrimSpace(said), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the program found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, f := range append(keys, tokens...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if secret := strings.TrimSpace(string(b)); strings.Contains(env, secret) {
			t.Errorf("the program's environment holds the secret of %s", f)
		}
	}
	for _, name := range []string{"DROVER_OPERATOR_TOKEN=", "DROVER_SUBMIT_TOKEN=", "DROVER_GOSSIP_KEY=", "DROVER_TOKEN_FILE="} {
		if strings.Contains(env, name) {
			t.Errorf("the program's environment holds %s", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(victimDir, unitdir.StatusFile)); err != nil || strings.Contains(string(b), "planted") {
		t.Errorf("the other attempt's status: %v %q", err, b)
	}

	// Nor through a file:// artifact, which the root runner stages: the
	// node token, and the worker's TLS key when it has one.
	stolen := append(keys[:0:0], s.NodeToken)
	if k := filepath.Join(s.Dir, "worker-"+w.ID+"-key.pem"); slices.Contains(keys, k) {
		stolen = append(stolen, k)
	}
	for _, f := range stolen {
		id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/cat", filepath.Base(f)}, Cores: 1, MemoryMB: 64, Artifacts: []model.Artifact{{Source: "file://" + f}}}})
		d := c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
		if want := "fetch file://" + f + ": user nobody may not read it: permission denied"; d.State != model.DriverFailed || d.Message != want {
			t.Errorf("a driver staging %s ended %s (%s), want FAILED: %s", f, d.State, d.Message, want)
		}
		work := filepath.Join(w.Dir, id, "attempt-1", unitdir.ProgramDir)
		if des, err := os.ReadDir(work); err != nil || len(des) != 0 {
			t.Errorf("the program's directory of a driver staging %s holds %v (%v), want nothing", f, des, err)
		}
		out, _, _ := runDrover(t, c.ClientEnv(), "client", "logs", id)
		if b, err := os.ReadFile(f); err != nil || strings.Contains(out, strings.TrimSpace(string(b))) {
			t.Errorf("the output of a driver staging %s shows it (%v)", f, err)
		}
	}
}
