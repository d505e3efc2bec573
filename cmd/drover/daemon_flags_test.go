package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// withStderr runs cmd with os.Stderr, where the daemons' commands print
// their refusals, going to a file, and returns what it printed and its
// exit code.
func withStderr(t *testing.T, cmd func() int) (string, int) {
	t.Helper()
	_, stderr, code := withOutput(t, cmd)
	return stderr, code
}

// withOutput runs cmd with os.Stdout and os.Stderr going to files, and
// returns what it printed on each and its exit code.
func withOutput(t *testing.T, cmd func() int) (stdout, stderr string, code int) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	savedOut, savedErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = out, errf
	code = cmd()
	os.Stdout, os.Stderr = savedOut, savedErr
	o, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	e, err := os.ReadFile(errf.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(o), string(e), code
}

// helpDefault is the default that usage text gives for flag name, "" when
// it gives none.
func helpDefault(help, name string) string {
	if m := regexp.MustCompile(`\(default (.*)\)$`).FindStringSubmatch(helpLine(help, name)); m != nil {
		return m[1]
	}
	return ""
}

// helpLine returns the line of a --help output that gives flag name, ""
// for none.
func helpLine(help, name string) string {
	for _, l := range strings.Split(help, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--"+name+" ") {
			return l
		}
	}
	return ""
}

// The bounds on disks, logs, units, submitters, events and clients that
// docs/uploads.md, docs/logs.md, docs/security.md and docs/deployment.md
// promise are the daemons' defaults: uploads of 256 MiB in a store of 10
// GiB, 4 in flight per client; programs of 64 KiB; 100,000 drivers not
// ended, as many per client, and 10,000 apps; 64 MiB of events held, a
// stalled event stream cut off after 30 s, 16 event streams and 64
// blocking reads per client; pages of at most 10,000 rows; environment
// values hidden in the UI under Spark's default redaction pattern; a
// worker lost after 15 s without a heartbeat; finished units kept 7
// days, 10 MiB x 5 files of each stream, 4096 processes per unit,
// restarts and stagings again after 1 s doubling to 1 min; and programs
// run as nobody with
// PATH, HOME, LANG, LC_*, TZ and TMPDIR of the worker's environment.
func TestDaemonDefaults(t *testing.T) {
	worker, _, code := withOutput(t, func() int { return runWorker([]string{"--help"}) })
	if code != 0 {
		t.Fatalf("worker --help: exit %d\n%s", code, worker)
	}
	master, _, code := withOutput(t, func() int { return runMaster([]string{"--help"}) })
	if code != 0 {
		t.Fatalf("master --help: exit %d\n%s", code, master)
	}
	// pflag shows no default of 0: the usage says it.
	if l := helpLine(master, "max-running-drivers"); !strings.Contains(l, "0, the default, for no bound") {
		t.Errorf("--max-running-drivers: %q does not give its default", l)
	}
	for _, c := range []struct{ help, flag, want string }{
		{master, "max-upload", "256m"},
		{master, "max-program-size", "64k"},
		{master, "max-live-drivers", "100000"},
		{master, "max-live-drivers-per-client", "100000"},
		{master, "max-live-apps", "10000"},
		{master, "max-upload-store", "10g"},
		{master, "max-uploads-per-client", "4"},
		{master, "event-buffer-size", "64m"},
		{master, "event-write-timeout", "30s"},
		{master, "worker-heartbeat-timeout", "15s"},
		{master, "max-event-streams-per-client", "16"},
		{master, "max-blocking-reads-per-client", "64"},
		{master, "max-list-page", "10000"},
		{master, "preemption-grace", "30s"},
		{master, "preemption-interval", "3s"},
		{master, "redact-regex", `"(?i)secret|password|token|access[._]?key"`},
		{worker, "cleanup-ttl", "168h0m0s"},
		{worker, "log-max-size", "10m"},
		{worker, "log-max-files", "5"},
		{worker, "pids-limit", "4096"},
		// A supervised driver without restart bounds whose staging keeps
		// failing (a 404) stages again at most once a minute.
		{worker, "restart-backoff", "1s"},
		{worker, "restart-backoff-max", "1m0s"},
		{worker, "run-as", `"nobody"`},
		{worker, "env-allow", "[PATH,HOME,LANG,LC_*,TZ,TMPDIR]"},
	} {
		if got := helpDefault(c.help, c.flag); got != c.want {
			t.Errorf("--%s defaults to %q, want %q", c.flag, got, c.want)
		}
	}
}

// A pids limit that is not positive is refused in one line before the
// worker makes anything.
func TestWorkerRefusesANonPositivePidsLimit(t *testing.T) {
	// A gossip port in use: a worker that took the limit would fail
	// there, rather than run until a signal.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	for _, limit := range []string{"0", "-1"} {
		dir := filepath.Join(t.TempDir(), "work")
		out, code := withStderr(t, func() int {
			return runWorker([]string{"--id", "w1", "--masters", "127.0.0.1:1", "--work-dir", dir, "--bind", "127.0.0.1",
				"--http-port", "0", "--gossip-port", port, "--cores", "1", "--memory", "1g", "--pids-limit", limit})
		})
		if want := "drover: --pids-limit " + limit + " must be positive\n"; code != 1 || out != want {
			t.Errorf("--pids-limit %s: exit %d, stderr %q; want exit 1 and %q", limit, code, out, want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("--pids-limit %s made the work dir %s (%v)", limit, dir, err)
		}
	}
}

// A bound on submitters or events that makes no sense is refused in one
// line naming it, before the master makes anything.
func TestMasterRefusesBadBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-program-size", "0"}, `drover: invalid argument "0" for "--max-program-size" flag: size "0" is below 1k`},
		{[]string{"--max-program-size", "65536"}, "drover: --max-program-size (68719476736 bytes) is above the bound on a request's body (1048576 bytes), which it could never reach; a bare number is MiB, write 64k for 64 KiB"},
		{[]string{"--max-live-drivers", "-1"}, "drover: --max-live-drivers, --max-live-drivers-per-client and --max-live-apps must not be negative"},
		{[]string{"--max-running-drivers", "-1"}, "drover: --max-running-drivers -1: want 0 (no bound) or more"},
		{[]string{"--max-live-apps", "-1"}, "drover: --max-live-drivers, --max-live-drivers-per-client and --max-live-apps must not be negative"},
		{[]string{"--max-upload-store", "100m"}, "drover: --max-upload-store (104857600 bytes) must be at least --max-upload (268435456 bytes), or no file of that size could be stored"},
		{[]string{"--max-uploads-per-client", "-1"}, "drover: --max-uploads-per-client must not be negative"},
		{[]string{"--event-buffer-size", "1023k"}, `drover: invalid argument "1023k" for "--event-buffer-size" flag: size "1023k" is below 1m`},
		{[]string{"--max-event-streams-per-client", "-1"}, "--max-event-streams-per-client and --max-blocking-reads-per-client must not be negative"},
		{[]string{"--max-blocking-reads-per-client", "-1"}, "--max-event-streams-per-client and --max-blocking-reads-per-client must not be negative"},
		{[]string{"--event-write-timeout", "0s"}, "drover: --event-write-timeout must be positive"},
		{[]string{"--spark-rest-leader-wait", "60001ms"}, "drover: --spark-rest-leader-wait 1m0.001s is outside 0 to 1m0s (0 does not wait)"},
		{[]string{"--spark-rest-leader-wait", "-1ms"}, "drover: --spark-rest-leader-wait -1ms is outside 0 to 1m0s (0 does not wait)"},
		{[]string{"--max-list-page", "0"}, "drover: --max-list-page 0 must be at least 1"},
		{[]string{"--preemption-grace", "999ms"}, "drover: --preemption-grace 999ms is outside 1s to 1h0m0s"},
		{[]string{"--preemption-grace", "3600001ms"}, "drover: --preemption-grace 1h0m0.001s is outside 1s to 1h0m0s"},
		{[]string{"--preemption-interval", "99ms"}, "drover: --preemption-interval 99ms is outside 100ms to 1m0s"},
		{[]string{"--preemption-interval", "60001ms"}, "drover: --preemption-interval 1m0.001s is outside 100ms to 1m0s"},
		{[]string{"--redact-regex", "(?i)secret|(token"}, `drover: --redact-regex "(?i)secret|(token" does not compile: error parsing regexp: missing closing )`},
		{[]string{"--worker-heartbeat-timeout", "5999ms"}, "drover: --worker-heartbeat-timeout 5.999s is below 6s: a live worker's heartbeats may pause that long when the leader changes"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		args := append([]string{"--id", "m1", "--data-dir", dir, "--bind", "127.0.0.1", "--peers", "m1=127.0.0.1:1"}, tc.args...)
		out, code := withStderr(t, func() int { return runMaster(args) })
		if code != 1 || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", tc.args, code, out, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v made the data dir %s (%v)", tc.args, dir, err)
		}
	}
}

// A worker never holds the operator token: given one by flag, variable or
// file variable, it refuses in one line that names the node token, before
// it reads the file or makes anything; its --help offers the node token
// and not the operator token, which a master's still offers.
func TestWorkerRefusesTheOperatorToken(t *testing.T) {
	// A gossip port in use: a worker that took the token would fail
	// there, rather than run until a signal.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	tok := filepath.Join(t.TempDir(), "operator.token")
	if err := os.WriteFile(tok, []byte("OperatorTok-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		flags    []string
		env, val string
	}{
		{"flag", []string{"--operator-token-file", tok}, "", ""},
		{"a missing file", []string{"--operator-token-file", filepath.Join(t.TempDir(), "none")}, "", ""},
		{"file variable", nil, "DROVER_OPERATOR_TOKEN_FILE", tok},
		{"token variable", nil, "DROVER_OPERATOR_TOKEN", "OperatorTok-0123456789abcdef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.val)
			}
			dir := filepath.Join(t.TempDir(), "work")
			out, code := withStderr(t, func() int {
				return runWorker(append([]string{"--id", "w1", "--masters", "127.0.0.1:1", "--work-dir", dir, "--bind", "127.0.0.1",
					"--http-port", "0", "--gossip-port", port, "--cores", "1", "--memory", "1g"}, tc.flags...))
			})
			if code != 1 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "workers no longer take the operator token") ||
				!strings.Contains(out, "--node-token-file") {
				t.Errorf("exit %d, stderr %q; want exit 1 and one line naming --node-token-file", code, out)
			}
			if strings.Contains(out, "OperatorTok-") {
				t.Errorf("the refusal shows the token: %q", out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the refused worker made its work dir %s (%v)", dir, err)
			}
		})
	}
	worker, _, _ := withOutput(t, func() int { return runWorker([]string{"--help"}) })
	master, _, _ := withOutput(t, func() int { return runMaster([]string{"--help"}) })
	for _, c := range []struct {
		help, flag string
		want       bool
	}{
		{worker, "--node-token-file", true}, {worker, "--operator-token-file", false},
		{master, "--node-token-file", true}, {master, "--operator-token-file", true}, {master, "--allow-unbound-worker-certs", true},
	} {
		if got := regexp.MustCompile(regexp.QuoteMeta(c.flag) + `[ [=]`).MatchString(c.help); got != c.want {
			t.Errorf("--help lists %s: %v, want %v", c.flag, got, c.want)
		}
	}
}

// The bounds on events, clients and worker heartbeats are taken at their
// limits: an event buffer of 1m, a write timeout of 1ns, no bound on
// streams and blocking reads, a worker heartbeat timeout of 6s. (The
// master then stops at a port of 0, the one error left.)
func TestMasterTakesBoundsAtTheirLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	out, code := withStderr(t, func() int {
		return runMaster([]string{"--id", "m1", "--data-dir", dir, "--raft-port", "0", "--event-buffer-size", "1m", "--max-program-size", "1m",
			"--event-write-timeout", "1ns", "--max-event-streams-per-client", "0", "--max-blocking-reads-per-client", "0",
			"--worker-heartbeat-timeout", "6s", "--max-list-page", "1", "--redact-regex", "^$", "--preemption-grace", "1s", "--preemption-interval", "100ms"})
	})
	if want := "drover: --raft-port 0 is not a port\n"; code != 1 || out != want {
		t.Errorf("every bound at its limit: exit %d, stderr %q; want exit 1 and %q", code, out, want)
	}
}

// The worker daemon makes itself non-dumpable before it reads any secret,
// so that no process of its user (programs it runs as itself included)
// reads its keys and tokens through /proc/PID or ptrace.
func TestWorkerIsNotDumpable(t *testing.T) {
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	if _, code := withStderr(t, func() int { return runWorker([]string{"--help"}) }); code != 0 {
		t.Fatalf("worker --help: exit %d", code)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Fatalf("the worker's process is dumpable (%d, %v)", d, err)
	}
}
