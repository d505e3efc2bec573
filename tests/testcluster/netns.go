package testcluster

import (
	"os"
	"os/exec"
	"testing"
)

// netnsEnv marks a test process that already runs in its own network
// namespace.
const netnsEnv = "DROVER_TEST_NETNS"

// InOwnNetns makes the calling test run in a private network namespace, so it
// may add iptables rules that cut nodes apart without touching the host's.
// Outside such a namespace it re-runs this one test in a new one (unshare
// --net) and returns false: the caller returns at once, the test's outcome
// being the child's. Inside, it brings loopback up and returns true. Without
// root, unshare or iptables, it skips the test with the reason.
func InOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == "1" {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set lo up: %v: %s", err, out)
		}
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a network namespace and iptables rules (CI runs it as root)")
	}
	for _, tool := range []string{"unshare", "iptables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s is not installed (.ci/run installs it)", tool)
		}
	}
	Binary(t) // build outside, so the child finds it cached
	cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsEnv+"=1", BinaryEnv+"="+binPath)
	out, err := cmd.CombinedOutput()
	t.Logf("in its own network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("test failed in its network namespace: %v", err)
	}
	return false
}

// Partition drops every packet between a and b, both ways, with iptables
// rules in the namespace's own DROVER chain, and returns a function that
// heals it. Only for tests inside InOwnNetns.
func Partition(t *testing.T, a, b *Node) (heal func()) {
	t.Helper()
	if os.Getenv(netnsEnv) != "1" {
		t.Fatal("Partition outside a private network namespace")
	}
	run := func(args ...string) error {
		out, err := exec.Command("iptables", args...).CombinedOutput()
		if err != nil {
			t.Logf("iptables %v: %v: %s", args, err, out)
		}
		return err
	}
	if run("-L", "DROVER", "-n") != nil {
		if err := run("-N", "DROVER"); err != nil {
			t.Fatal(err)
		}
		if err := run("-I", "INPUT", "-j", "DROVER"); err != nil {
			t.Fatal(err)
		}
	}
	rules := [][]string{{"-s", a.IP, "-d", b.IP, "-j", "DROP"}, {"-s", b.IP, "-d", a.IP, "-j", "DROP"}}
	for _, r := range rules {
		if err := run(append([]string{"-A", "DROVER"}, r...)...); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, r := range rules {
			_ = run(append([]string{"-D", "DROVER"}, r...)...)
		}
	}
}
