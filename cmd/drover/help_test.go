package main

import (
	"strings"
	"testing"
)

// Every command's --help goes to stdout with exit 0, so that `drover X
// --help | less` shows it; a usage error (a bad flag, a missing command)
// stays on stderr with a non-zero exit.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"master", "--help"}, {"worker", "--help"}, {"dev", "--help"},
		{"client", "--help"}, {"client", "submit", "--help"}, {"client", "status", "-h"}, {"client", "list", "--help"},
		{"client", "kill", "--help"}, {"client", "logs", "--help"}, {"client", "watch", "--help"},
		{"operator", "--help"}, {"operator", "raft", "list-peers", "--help"}, {"operator", "snapshot", "save", "--help"},
		{"tls", "--help"}, {"tls", "ca", "--help"}, {"keygen", "--help"},
	} {
		stdout, stderr, code := withOutput(t, func() int { return run(args) })
		if code != 0 || stderr != "" || !strings.Contains(strings.ToLower(stdout), "usage") {
			first, _, _ := strings.Cut(stderr, "\n")
			t.Errorf("drover %s: exit %d, %d bytes on stderr (%q...), %d on stdout; want exit 0, the usage on stdout and nothing on stderr",
				strings.Join(args, " "), code, len(stderr), first, len(stdout))
		}
	}
	for _, args := range [][]string{
		{"master", "--bogus"}, {"worker", "--bogus"}, {"dev", "--bogus"}, {"client"}, {"client", "list", "--bogus"},
		{"operator"}, {"operator", "raft", "list-peers", "--bogus"}, {"tls", "ca", "--bogus"},
	} {
		stdout, stderr, code := withOutput(t, func() int { return run(args) })
		if code == 0 || stdout != "" || stderr == "" {
			t.Errorf("drover %s: exit %d, stdout %q, stderr %q; want a non-zero exit and the error on stderr alone",
				strings.Join(args, " "), code, stdout, stderr)
		}
	}
}
