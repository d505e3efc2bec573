package nemesis

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// Chain is the iptables chain that holds every rule the nemesis adds,
// hooked into INPUT: on loopback each packet passes INPUT once, at its
// destination, so one rule cuts one direction of one link.
const Chain = "JEPSEN"

// Net adds and removes packet-drop rules in the suite's own chain. It must
// run inside the suite's private network namespace. Safe for concurrent use.
type Net struct {
	mu sync.Mutex
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Setup creates the chain (empty) and hooks it into INPUT.
func (n *Net) Setup() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if iptables("-N", Chain) != nil {
		if err := iptables("-F", Chain); err != nil {
			return err
		}
		return nil
	}
	return iptables("-I", "INPUT", "-j", Chain)
}

// Drop cuts the link from src to dst (one direction). With probability p
// in (0,1) only that share of packets is dropped (iptables' statistic
// match; tc netem is not available), which makes a flaky link.
func (n *Net) Drop(src, dst string, p float64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	args := []string{"-A", Chain, "-s", src, "-d", dst}
	if p > 0 && p < 1 {
		args = append(args, "-m", "statistic", "--mode", "random", "--probability", fmt.Sprintf("%.2f", p))
	}
	return iptables(append(args, "-j", "DROP")...)
}

// Heal removes every rule.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return iptables("-F", Chain)
}
