package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
)

// operatorUsage is drover operator's help; %s is the default --timeout.
const operatorUsage = `usage: drover operator [--masters a,b,c] [--timeout D] <command> [flags]

commands (operator token; drover operator help COMMAND, or COMMAND
--help, for one's usage):
  raft list-peers [--stale]            the Raft voters, their addresses, the
                                       leader, and whether each answers
  raft add-voter --id ID --address HOST:RAFT_PORT
                                       add a master started without --peers
  raft remove-peer --id ID             remove a master, alive or dead
  raft transfer-leadership [--id ID]   hand leadership to ID, or to the most
                                       up-to-date voter
  snapshot save FILE                   write a snapshot of the cluster's tables
  snapshot restore FILE                replace the tables with FILE's (disaster
                                       recovery: every write since FILE is lost)
  namespace apply NAME [--cores N] [--memory SIZE] [--resource NAME=N]...
        [--max-running-drivers N] [--max-queued-drivers N] [--weight W]
        [--driver-share F] [--priority-max P] [--preempt]
                                       create a namespace or replace its settings
  namespace list [--json]              the namespaces, their quotas and use
  namespace status NAME [--json]       quota, use, fair share, queued, running,
                                       preemptions
  namespace delete NAME                delete one that holds no live work
  token create --namespace NAME... --policy submit|read [--name TEXT]
        [--ttl D] [--json]             an ACL token; its secret is shown once
  token list [--json]                  the ACL tokens, without secrets
  token revoke ACCESSOR                revoke an ACL token
  help [COMMAND]                       print this, COMMAND's usage, or a
                                       group's verbs (help namespace)

The flags below go before the command or after it (drover operator raft
list-peers --masters a,b,c); given twice, the later wins.
  --masters a,b,c  master HTTP addresses (default $DROVER_MASTERS)
  --timeout D      how long to keep trying the masters, positive (default %s)
  credentials as for drover client: --ca-cert, --token-file (or
  $DROVER_CACERT, $DROVER_TOKEN_FILE, $DROVER_TOKEN), --client-cert,
  --client-key; --bind IP

Exit codes: 0 success, 1 refused or bad usage, 2 no leader within --timeout,
130 interrupted by Ctrl-C (SIGINT; 143 for SIGTERM).
`

func runOperator(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("drover operator", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	// As drover client's: --help on stdout, a missing command on stderr.
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), operatorUsage, defaultTimeout) }
	// A snapshot can be as large as the tables and take a while to cut.
	k := newCLI(fs, client.Options{RequestTimeout: 5 * time.Minute, MaxResponseBytes: api.MaxSnapshotBytes}, stdout, stderr)
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(stderr, err)
	}
	if fs.NArg() == 0 {
		fs.SetOutput(stderr)
		fs.Usage()
		return 1
	}
	ctx, stop := interruptContext(context.Background())
	defer stop()
	k.signals = ctx
	k.commands = operatorCommands
	if fs.Arg(0) == helpCommand {
		return k.help(ctx, fs.Args()[1:], fs.Usage)
	}
	if code, ok := runGroup(ctx, k, fs.Arg(0), fs.Args()[1:]); ok {
		return code
	}
	fmt.Fprintf(stderr, "drover operator: unknown command %q (see drover operator --help)\n", fs.Arg(0))
	return 1
}

// printPeers prints the Raft configuration as a table; with reach (by
// master ID), a column says whether each voter answers.
func (k *cli) printPeers(p *api.RaftPeers, reach map[string]string) {
	tw := tabwriter.NewWriter(k.stdout, 0, 4, 2, ' ', 0)
	header := "ID\tADDRESS\tHTTP\tSUFFRAGE\tSTATE"
	if reach != nil {
		header += "\tREACHABLE"
	}
	fmt.Fprintln(tw, header)
	for _, s := range p.Peers {
		state := "follower"
		if s.Leader {
			state = "leader"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", s.ID, s.RaftAddr, s.HTTPAddr, s.Suffrage, state)
		if reach != nil {
			row += "\t" + reach[s.ID]
		}
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()
}

// reachTimeout bounds each voter's health probe in list-peers: a master
// that does not answer within it is as good as unreachable to an operator.
const reachTimeout = 2 * time.Second

// reachability asks every peer whose HTTP address is known for its health
// (GET /v1/health), all at once, and says by master ID whether it
// answered: yes, yes with its degraded status, no, or unknown without an
// address. Why one did not answer is printed on stderr.
func (k *cli) reachability(ctx context.Context, peers []api.Master) map[string]string {
	reach := make(map[string]string, len(peers))
	why := make(map[string]error, len(peers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		if p.HTTPAddr == "" {
			mu.Lock()
			reach[p.ID] = "unknown"
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, min(reachTimeout, k.timeout))
			defer cancel()
			h, err := k.c.Health(ctx, p.HTTPAddr)
			v := "yes"
			switch {
			case err != nil:
				v = "no"
			case h.Status != "ok":
				v = "yes, " + h.Status
			}
			mu.Lock()
			defer mu.Unlock()
			reach[p.ID], why[p.ID] = v, err
		})
	}
	wg.Wait()
	for _, p := range peers {
		if err := why[p.ID]; err != nil {
			fmt.Fprintf(k.stderr, "drover: %s does not answer: %v\n", p.ID, err)
		}
	}
	return reach
}

func (k *cli) listPeers(ctx context.Context, args []string) int {
	fs := k.flags("raft list-peers")
	stale := fs.Bool("stale", false, "ask any master for its own view (works without a leader)")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	var p *api.RaftPeers
	err := k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.RaftPeers(ctx, *stale); return err })
	if err != nil {
		return k.exitFor(err)
	}
	k.printPeers(p, k.reachability(ctx, p.Peers))
	return 0
}

func (k *cli) addVoter(ctx context.Context, args []string) int {
	fs := k.flags("raft add-voter")
	id := fs.String("id", "", "the new master's --id")
	addr := fs.String("address", "", "the new master's Raft address, host:raft-port")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if *id == "" || *addr == "" {
		return k.exitFor(errors.New("add-voter needs --id and --address"))
	}
	var p *api.RaftPeers
	err := k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.AddVoter(ctx, *id, *addr); return err })
	if err != nil {
		return k.exitFor(err)
	}
	k.printPeers(p, nil)
	return 0
}

func (k *cli) removePeer(ctx context.Context, args []string) int {
	fs := k.flags("raft remove-peer")
	id := fs.String("id", "", "the master to remove")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if *id == "" {
		return k.exitFor(errors.New("remove-peer needs --id"))
	}
	var p *api.RaftPeers
	err := k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.RemovePeer(ctx, *id); return err })
	if err != nil {
		return k.exitFor(err)
	}
	k.printPeers(p, nil)
	return 0
}

func (k *cli) transferLeadership(ctx context.Context, args []string) int {
	fs := k.flags("raft transfer-leadership")
	id := fs.String("id", "", "the voter to hand leadership to (default: the most up-to-date one)")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	var leader string
	err := k.call(ctx, func(ctx context.Context) (err error) { leader, err = k.c.TransferLeadership(ctx, *id); return err })
	if err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "leader is now %s\n", leader)
	return 0
}

func (k *cli) snapshotSave(ctx context.Context, args []string) int {
	fs := k.flags("snapshot save")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return k.exitFor(errors.New("snapshot save takes one FILE"))
	}
	var b []byte
	err := k.call(ctx, func(ctx context.Context) (err error) { b, err = k.c.SnapshotSave(ctx); return err })
	if err != nil {
		return k.exitFor(err)
	}
	// Written aside and renamed, so a failed save never leaves half a
	// backup under the name.
	path := fs.Arg(0)
	tmp := path + ".part"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return k.exitFor(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "saved %d bytes to %s\n", len(b), path)
	return 0
}

func (k *cli) snapshotRestore(ctx context.Context, args []string) int {
	fs := k.flags("snapshot restore")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return k.exitFor(errors.New("snapshot restore takes one FILE"))
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return k.exitFor(err)
	}
	var p *api.RaftPeers
	err = k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.SnapshotRestore(ctx, b); return err })
	if err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "restored %s\n", fs.Arg(0))
	k.printPeers(p, nil)
	return 0
}
