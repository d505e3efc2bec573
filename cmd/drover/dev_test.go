package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/devsecrets"
)

// drover dev refuses, before it makes anything, what would start a
// cluster whose workers or masters die at start, and a --spark-launcher
// that no master would use.
func TestDevRefusesWorkersThatCannotStart(t *testing.T) {
	for _, args := range [][]string{
		{"--worker-cores", "0"}, {"--worker-cores", "-2"}, {"--worker-memory", "0"}, {"--masters", "0"}, {"--workers", "-1"},
		{"--spark-launcher", "spark-submit {{mainClas}}", "--spark-rest-port", "6066"}, {"--spark-launcher", "spark-submit"},
	} {
		dir := filepath.Join(t.TempDir(), "cluster")
		if code := runDev(append([]string{"--dir", dir}, args...)); code != 1 {
			t.Errorf("dev %v: exit %d, want 1", args, code)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("dev %v made %s", args, dir)
		}
	}
}

// dev's env file is a shell's to source: after `. FILE` the exports reach
// a program the shell starts (drover client), and the other assignments
// are the shell's, whatever quotes, spaces or dollars the directory's
// name holds.
func TestDevEnvFileCanBeSourced(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, `it's a "dev" $HOME dir`)
	file := filepath.Join(base, "cluster.env")
	env := devEnv("127.0.0.1:7102,127.0.0.1:7202", "spark://127.0.0.1:6066", &devsecrets.Secrets{
		CA: filepath.Join(dir, "secrets", "ca.pem"), SubmitToken: filepath.Join(dir, "secrets", "submit.token"),
	})
	nodes := []*devNode{{id: "m1", http: "127.0.0.1:7102", cmd: &exec.Cmd{Process: &os.Process{Pid: 4242}}}}
	if err := writeEnvFile(file, dir, env, nodes); err != nil {
		t.Fatal(err)
	}
	// env -i: only what the file sets and exports is there; the child
	// shell sees the exports only.
	out, err := exec.Command("env", "-i", "/bin/sh", "-c",
		`. "$1" && printf '%s\n' "$DROVER_DEV_DIR" "$m1_PID" "$m1_HTTP" && /bin/sh -c 'printf "%s\n" "$DROVER_MASTERS" "$SPARK_MASTER_URL" "$DROVER_CACERT" "$DROVER_TOKEN_FILE" "${DROVER_DEV_DIR-unset}"'`,
		"sh", file).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing %s: %v\n%s", file, err, out)
	}
	want := strings.Join([]string{dir, "4242", "127.0.0.1:7102",
		"127.0.0.1:7102,127.0.0.1:7202", "spark://127.0.0.1:6066", filepath.Join(dir, "secrets", "ca.pem"), filepath.Join(dir, "secrets", "submit.token"), "unset"}, "\n") + "\n"
	if string(out) != want {
		b, _ := os.ReadFile(file)
		t.Errorf("the shell got\n%s\nwant\n%s\nfrom the file\n%s", out, want, b)
	}
}

// devTestNodeFail, set in the environment, makes this test binary, run by
// drover dev as its nodes (TestMain), print its value and exit 1.
const devTestNodeFail = "DEVTEST_NODE_FAIL"

// TestMain lets drover dev, run in a test, start nodes: os.Executable is
// this test binary, which then plays a node that cannot start, as one
// whose port another process took, printing devTestNodeFail's value. It
// never runs the tests as a node: a dev that started nodes in a test
// that expects none would start them again, and so on.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "master" || os.Args[1] == "worker") {
		fmt.Fprintln(os.Stderr, "starting", os.Args[1])
		fmt.Fprintln(os.Stderr, cmp.Or(os.Getenv(devTestNodeFail), "this test binary is no drover node"))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// runDevWithin runs drover dev with args and its output captured; if it
// has not returned within 30s, it is stopped as Ctrl-C would, and the
// test fails: a dev that loops must fail the test, not hang it.
func runDevWithin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return withOutput(t, func() int {
		done := make(chan int, 1)
		go func() { done <- runDev(args) }()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Errorf("dev %v still running after 30s", args)
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
			return <-done
		}
	})
}

// A dev whose flags a node would refuse, whose --bind this machine does
// not have, whose --env-file cannot be written or whose --dir holds an
// earlier run's files says so in one line and makes nothing: no
// temporary directory, no credentials.
func TestDevRefusesBeforeItMakesAnything(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	earlier := filepath.Join(t.TempDir(), "earlier")
	if err := os.MkdirAll(filepath.Join(earlier, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gossip-profile", "mars"}, `--gossip-profile: unknown gossip profile "mars" (want lan, local or wan)`},
		{[]string{"--bind", "::1x"}, `--bind "::1x" is not an IP address`},
		{[]string{"--bind", "10.255.255.1"}, "--bind: free port on 10.255.255.1: "},
		{[]string{"--env-file", "/nonexistent/dir/env"}, "--env-file /nonexistent/dir/env: stat /nonexistent/dir: no such file or directory"},
		{[]string{"--dir", earlier}, "--dir " + earlier + " is not empty (an earlier drover dev's?)"},
	} {
		_, stderr, code := runDevWithin(t, c.args...)
		if code != 1 || !strings.HasPrefix(stderr, "drover: "+c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("dev %v: exit %d, stderr %q; want 1 and one line %q", c.args, code, stderr, c.want)
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("dev %v left %v in $TMPDIR", c.args, left)
		}
		if left, _ := os.ReadDir(earlier); len(left) != 1 {
			t.Errorf("dev %v changed the earlier run's %s: %v", c.args, earlier, left)
		}
	}
}

// A node that exits before the cluster is up ends dev: dev says which,
// prints the last lines of its log (its reason), stops the others and
// removes the directory it made; with --keep it keeps it and says where.
func TestDevNodeThatCannotStartEndsIt(t *testing.T) {
	const reason = "drover: listen tcp 127.0.0.1:10007: bind: address already in use"
	t.Setenv(devTestNodeFail, reason)
	for _, keep := range []bool{false, true} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		args := []string{"--insecure", "--masters", "1", "--workers", "0", "--restart-after", "1s"}
		if keep {
			args = append(args, "--keep")
		}
		stdout, stderr, code := runDevWithin(t, args...)
		if code != 1 || !regexp.MustCompile(`^drover: master m1 \(pid \d+\) exited before the cluster was up: exit status 1\n$`).MatchString(stderr) {
			t.Errorf("dev %v: exit %d, stderr %q; want 1 and a line naming m1 and its exit", args, code, stderr)
		}
		if !strings.Contains(stdout, "  m1.log: starting master\n  m1.log: "+reason+"\n") {
			t.Errorf("dev %v did not print the last lines of m1.log; it printed:\n%s", args, stdout)
		}
		left, _ := os.ReadDir(tmp)
		switch {
		case !keep && len(left) > 0:
			t.Errorf("dev %v left %v in $TMPDIR", args, left)
		case !keep && !strings.Contains(stdout, "removed "+tmp+"/drover-dev-"):
			t.Errorf("dev %v did not say it removed its directory:\n%s", args, stdout)
		case keep && (len(left) != 1 || !strings.Contains(stdout, "kept "+filepath.Join(tmp, left[0].Name())+" ")):
			t.Errorf("dev %v: $TMPDIR holds %v; want its directory kept, and said so:\n%s", args, left, stdout)
		}
	}
}

// logTail gives a log's last lines, at most its last logTailBytes read:
// of a line longer than that, the end.
func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m1.log")
	long := strings.Repeat("x", 2*logTailBytes)
	for _, c := range []struct {
		content string
		want    []string
	}{
		{"", nil},
		{"one\ntwo\n\nthree\nfour\n", []string{"two", "three", "four"}},
		{"a\nb", []string{"a", "b"}},
		{long + "\nlast\n", []string{"last"}},
		{"first\n" + long, []string{long[len(long)-logTailBytes:]}},
	} {
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := logTail(path, logTailLines)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("logTail of %.20q: %q, %v; want %q", c.content, got, err, c.want)
		}
	}
}

// Once the cluster is up, dev shows how to use the operator token as well
// as where it is: the exports carry the submit token, which operator
// calls refuse, so it prints a command line setting the variable the CLI
// reads a token file from to the operator token's path, quoted for the
// shell.
func TestDevShowsHowToUseTheOperatorToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's dev")
	sec := &devsecrets.Secrets{Dir: filepath.Join(dir, "secrets"), CA: filepath.Join(dir, "secrets", "ca.pem"),
		OperatorToken: filepath.Join(dir, "secrets", "operator.token"), SubmitToken: filepath.Join(dir, "secrets", "submit.token")}
	var out bytes.Buffer
	printDev(&out, "drover", dir, "127.0.0.1:7102", "", devEnv("127.0.0.1:7102", "", sec), nil, sec)
	want := "  DROVER_TOKEN_FILE=" + shellQuote(sec.OperatorToken) + " drover operator namespace list\n"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("dev's output lacks %q:\n%s", want, out.String())
	}
	// The variable is the one the CLI reads.
	t.Setenv(client.EnvTokenFile, sec.OperatorToken)
	if got := newConnectFlags().tokenFile; got != sec.OperatorToken {
		t.Fatalf("$%s gives --token-file %q, want %q", client.EnvTokenFile, got, sec.OperatorToken)
	}
}
