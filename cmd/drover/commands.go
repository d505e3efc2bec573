package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

// command is one command of drover client or drover operator: its name
// ("status", "raft list-peers"), a one-line synopsis of its arguments,
// a sentence saying what it does, and the method that runs it. Each
// command is listed once, and its dispatch, its --help and help COMMAND
// come from the one entry.
type command struct {
	name, synopsis, about string
	run                   func(k *cli, ctx context.Context, args []string) int
}

// clientCommands are drover client's commands, in the order of its usage.
var clientCommands = []command{
	{"submit", "[--supervise] [--name NAME] [--driver-cores N] [--driver-memory SIZE] [--priority N] [--env K=V]... [--wait] [flags] -- PROGRAM [ARGS...]",
		"Submit a driver that runs PROGRAM with ARGS on a worker, as an argv (never through a shell); the driver ID is the last line of stdout.",
		(*cli).submit},
	{"status", "DRIVER_ID [--json]", "Print a driver's state, where it runs, what it asks for and a line for each of its attempts.", (*cli).status},
	{"kill", "DRIVER_ID", "Kill a driver: its attempt is stopped wherever it runs and the driver ends KILLED.", (*cli).kill},
	{"list", "[--state S]... [--name GLOB] [--worker W] [--schedule NAME] [--all-namespaces] [--page-size N] [--json]",
		"List drivers, filtered by the masters and printed a page at a time.", (*cli).list},
	{"logs", "DRIVER_ID [--attempt N] [--stderr] [--follow] | APP_ID --executor N [--stderr] [--follow]",
		"Print a driver's, or an executor's, stdout (or stderr) as its worker keeps it.", (*cli).logs},
	{"leader", "", "Print the leader master's ID, once that master confirms it leads.", (*cli).leader},
	{"apps", "[--all-namespaces] [--json]", "List applications with their cores and live executors.", (*cli).apps},
	{"app", "APP_ID [--json]", "Print an application and its executors.", (*cli).app},
	{"kill-app", "APP_ID", "Kill an application and its executors.", (*cli).killApp},
	{"watch", "[ID...] [--kind K]... [--index N] [--json]",
		"Print every change of the cluster's rows as it commits; with one driver ID, follow that driver and exit as submit --wait does.",
		(*cli).watchEvents},
	{"schedule create", "NAME --cron SPEC [--time-zone ZONE] [--concurrency allow|forbid|replace] [--starting-deadline D] [--history N] [submit's flags] -- PROGRAM [ARGS...]",
		"Create a schedule that submits PROGRAM with ARGS, as submit would with the same flags, once at every slot of the cron spec, and print its next slot.",
		onSchedule(scheduleCLI.scheduleCreate)},
	{"schedule list", "[--all-namespaces] [--json]", "List the schedules with their next and last fired slots and their fired, missed and skipped counts.", onSchedule(scheduleCLI.scheduleList)},
	{"schedule status", "NAME [--json]", "Print a schedule's settings, next slot, last fired slot, counts and the drivers of its kept runs.", onSchedule(scheduleCLI.scheduleStatus)},
	{"schedule suspend", "NAME", "Suspend a schedule: none of its slots fires until it is resumed.", onSchedule(scheduleCLI.scheduleSuspend)},
	{"schedule resume", "NAME", "Resume a schedule: of the slots it passed, the latest fires if within its starting deadline and the rest are counted missed.", onSchedule(scheduleCLI.scheduleResume)},
	{"schedule run", "NAME", "Start one run of a schedule now, under its concurrency policy, and print its driver ID.", onSchedule(scheduleCLI.scheduleRun)},
	{"schedule delete", "NAME", "Delete a schedule; the drivers it started that have not ended go on.", onSchedule(scheduleCLI.scheduleDelete)},
}

// operatorCommands are drover operator's commands, named by group and
// verb.
var operatorCommands = []command{
	{"raft list-peers", "[--stale]", "List the Raft voters, their addresses, the leader, and whether each answers.", (*cli).listPeers},
	{"raft add-voter", "--id ID --address HOST:RAFT_PORT", "Add a master started without --peers to the Raft voters.", (*cli).addVoter},
	{"raft remove-peer", "--id ID", "Remove a master from the Raft voters, alive or dead.", (*cli).removePeer},
	{"raft transfer-leadership", "[--id ID]", "Hand leadership to voter ID, or to the most up-to-date voter.", (*cli).transferLeadership},
	{"snapshot save", "FILE", "Write a snapshot of the cluster's tables to FILE (written aside and renamed, never half a file).", (*cli).snapshotSave},
	{"snapshot restore", "FILE", "Replace the cluster's tables with FILE's: disaster recovery, every write since FILE is lost.", (*cli).snapshotRestore},
	{"namespace apply", "NAME [--cores N] [--memory SIZE] [--resource NAME=N]... [--max-running-drivers N] [--max-queued-drivers N] [--weight W] [--driver-share F] [--priority-max P] [--preempt]",
		"Create namespace NAME, or replace its settings: a flag left out takes a new namespace's default.", (*cli).namespaceApply},
	{"namespace list", "[--json]", "List the namespaces with their quotas, use, queued and running drivers.", (*cli).namespaceList},
	{"namespace status", "NAME [--json]", "Print a namespace's quota, use, fair share, queued and running drivers and preemptions.", (*cli).namespaceStatus},
	{"namespace delete", "NAME", "Delete a namespace that holds no driver or app that has not ended.", (*cli).namespaceDelete},
	{"token create", "--namespace NAME [--namespace NAME2]... --policy submit|read [--name TEXT] [--ttl D] [--json]",
		"Create an ACL token for the namespaces and print its accessor and its secret, which is shown this once.", (*cli).tokenCreate},
	{"token list", "[--json]", "List the ACL tokens by accessor, without their secrets.", (*cli).tokenList},
	{"token revoke", "ACCESSOR", "Revoke an ACL token: every master refuses it from then on.", (*cli).tokenRevoke},
}

// helpCommand is the help command of drover client and operator.
const helpCommand = "help"

// findCommand returns the command of cs named name.
func findCommand(cs []command, name string) (command, bool) {
	for _, c := range cs {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// synopsisOf is how command c of parent ("drover client") is called:
// "drover client schedule status NAME [--json]".
func synopsisOf(parent string, c command) string {
	return strings.TrimSpace(parent + " " + c.name + " " + c.synopsis)
}

// usageOf is the --help of command c of parent ("drover client"): its
// synopsis, its sentence and fs's flags.
func usageOf(w io.Writer, parent string, c command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n%s", synopsisOf(parent, c), c.about, fs.FlagUsages())
}

// groupOf returns the commands of cs in group, the first word of their
// names ("schedule" of "schedule create"), in their order; none when
// group is no group's.
func groupOf(cs []command, group string) []command {
	var out []command
	for _, c := range cs {
		if g, _, ok := strings.Cut(c.name, " "); ok && g == group {
			out = append(out, c)
		}
	}
	return out
}

// groupUsage is the help of a group of parent's commands (drover client
// schedule): a line per verb with its synopsis, as the parent's usage
// lists its commands.
func groupUsage(w io.Writer, parent, group string, verbs []command) {
	fmt.Fprintf(w, "usage: %s %s VERB [flags]\n\nverbs (%s help %s VERB, or VERB --help, for one's usage and flags):\n", parent, group, parent, group)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, c := range verbs {
		_, verb, _ := strings.Cut(c.name, " ")
		fmt.Fprintf(tw, "  %s\t%s\n", verb, c.synopsis)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nThe flags of %s (%s --help) go before %s or after the verb.\n", parent, parent, group)
}

// runGroup runs the words after group, the first word of a command
// (drover client schedule ...): the verb's command; or the group's usage
// (groupUsage) on stdout with exit 0 for --help, -h or help, on stderr
// with exit 1 without a verb, as the parent's usage is without a
// command; "help VERB" is the parent's help of that command. An unknown
// verb is one line, exit 1. It returns false when group is no group's.
// A function of k rather than a method, so that cli keeps at most 45
// methods (tests/layout).
func runGroup(ctx context.Context, k *cli, group string, rest []string) (int, bool) {
	verbs := groupOf(k.commands, group)
	switch {
	case len(verbs) == 0:
		return 0, false
	case len(rest) == 0:
		groupUsage(k.stderr, k.command, group, verbs)
		return 1, true
	case rest[0] == "--help" || rest[0] == "-h":
		groupUsage(k.stdout, k.command, group, verbs)
		return 0, true
	case rest[0] == helpCommand:
		return k.help(ctx, append([]string{group}, rest[1:]...), nil), true
	}
	if c, ok := findCommand(verbs, group+" "+rest[0]); ok {
		return c.run(k, ctx, rest[1:]), true
	}
	fmt.Fprintf(k.stderr, "%s: unknown command %q (see %s %s --help)\n", k.command, group+" "+rest[0], k.command, group)
	return 1, true
}

// help runs "help [COMMAND]": without a command it prints top, the
// parent's usage, with one it runs that command with --help, and with a
// group's name it prints the group's usage (groupUsage); all on stdout
// with exit 0. An unknown command is exit 1 on stderr.
func (k *cli) help(ctx context.Context, args []string, top func()) int {
	if len(args) == 0 {
		top()
		return 0
	}
	name := strings.Join(args, " ")
	c, ok := findCommand(k.commands, name)
	if !ok {
		if verbs := groupOf(k.commands, name); len(verbs) > 0 {
			groupUsage(k.stdout, k.command, name, verbs)
			return 0
		}
		fmt.Fprintf(k.stderr, "%s help: unknown command %q (see %s --help)\n", k.command, name, k.command)
		return 1
	}
	return c.run(k, ctx, []string{"--help"})
}
