package main

import (
	"regexp"
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

// Every client and operator command's --help starts with a synopsis of
// its arguments and a sentence saying what it does, and "help COMMAND"
// prints the same on stdout with exit 0; "help" alone is the parent's
// usage, and help of an unknown command is one line on stderr, exit 1.
func TestEveryCommandHasASynopsisAndHelp(t *testing.T) {
	for parent, cs := range map[string][]command{"client": clientCommands, "operator": operatorCommands} {
		names := map[string]bool{}
		for _, c := range cs {
			names[c.name] = true
			if c.about == "" || !strings.HasSuffix(c.about, ".") {
				t.Errorf("%s %s: no sentence", parent, c.name)
			}
			args := append([]string{parent}, strings.Fields(c.name)...)
			help, stderr, code := withOutput(t, func() int { return run(append(args, "--help")) })
			want := strings.TrimSpace("usage: drover " + parent + " " + c.name + " " + c.synopsis)
			if code != 0 || stderr != "" || !strings.HasPrefix(help, want+"\n\n"+c.about+"\n") || !strings.Contains(help, "--masters") {
				t.Errorf("drover %s --help: exit %d, stdout %q; want it to start %q and the sentence", strings.Join(args, " "), code, help, want)
			}
			viaHelp, stderr, code := withOutput(t, func() int { return run(append([]string{parent, "help"}, strings.Fields(c.name)...)) })
			if code != 0 || stderr != "" || viaHelp != help {
				t.Errorf("drover %s help %s: exit %d, stdout %q; want %s --help's", parent, c.name, code, viaHelp, c.name)
			}
		}
		top, _, _ := withOutput(t, func() int { return run([]string{parent, "--help"}) })
		viaHelp, stderr, code := withOutput(t, func() int { return run([]string{parent, "help"}) })
		if code != 0 || stderr != "" || viaHelp != top {
			t.Errorf("drover %s help: exit %d, stdout %q; want %s --help's", parent, code, viaHelp, parent)
		}
		stdout, stderr, code := withOutput(t, func() int { return run([]string{parent, "help", "bogus"}) })
		if code != 1 || stdout != "" || !strings.Contains(stderr, `unknown command "bogus"`) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("drover %s help bogus: exit %d, stdout %q, stderr %q; want 1 and one line", parent, code, stdout, stderr)
		}
		if len(names) != len(cs) {
			t.Errorf("drover %s lists a command twice", parent)
		}
	}
}

// drover client schedule with --help, -h or help, and help schedule,
// print the group's usage on stdout, exit 0: a line per verb with its
// synopsis; without a verb the same usage is on stderr, exit 1, as
// drover client's without a command, and so for drover operator's
// groups. --namespace's help shows one default.
func TestGroupHelp(t *testing.T) {
	for _, args := range [][]string{
		{"client", "schedule", "--help"}, {"client", "schedule", "-h"}, {"client", "help", "schedule"}, {"client", "schedule", "help"},
		{"operator", "namespace", "--help"}, {"operator", "help", "namespace"},
	} {
		stdout, stderr, code := drover(args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: drover "+args[0]+" ") {
			t.Errorf("drover %q: exit %d, stdout %q, stderr %q; want the group's usage on stdout", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"client", "schedule"}, {"operator", "namespace"}} {
		stdout, stderr, code := drover(args...)
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "usage: drover "+args[0]+" "+args[1]+" VERB") {
			t.Errorf("drover %q: exit %d, stdout %q, stderr %q; want 1 and the group's usage on stderr", args, code, stdout, stderr)
		}
	}
	help, _, _ := drover("client", "schedule", "--help")
	for _, c := range groupOf(clientCommands, "schedule") {
		_, verb, _ := strings.Cut(c.name, " ")
		if !regexp.MustCompile(`(?m)^  ` + verb + ` +` + regexp.QuoteMeta(c.synopsis) + `$`).MatchString(help) {
			t.Errorf("drover client schedule --help lacks the line of %s %s:\n%s", verb, c.synopsis, help)
		}
	}
	if n := strings.Count(help, "\n  "); n != 7 {
		t.Errorf("drover client schedule --help lists %d verbs, want 7:\n%s", n, help)
	}
	stdout, stderr, code := drover("client", "schedule", "bogus")
	if code != 1 || stdout != "" || stderr != "drover client: unknown command \"schedule bogus\" (see drover client schedule --help)\n" {
		t.Errorf("drover client schedule bogus: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, _, code := drover("client", "schedule", "help", "create"); code != 0 || !strings.HasPrefix(stdout, "usage: drover client schedule create NAME") {
		t.Errorf("drover client schedule help create: exit %d, %q", code, stdout)
	}
	for _, args := range [][]string{{"client", "list", "--help"}, {"client", "schedule", "create", "--help"}} {
		help, _, _ := drover(args...)
		if line := helpLine(help, "namespace"); strings.Count(line, "(default") != 1 || !strings.HasSuffix(line, `(default "default")`) {
			t.Errorf("drover %q: --namespace's line %q; want one default, pflag's", args, line)
		}
	}
}
