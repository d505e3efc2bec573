package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
)

const operatorUsage = `usage: drover operator [--masters a,b,c] [--timeout D] <command> [flags]

commands (operator token):
  raft list-peers [--stale]            the Raft voters, their addresses and the leader
  raft add-voter --id ID --address HOST:RAFT_PORT
                                       add a master started without --peers
  raft remove-peer --id ID             remove a master, alive or dead
  raft transfer-leadership [--id ID]   hand leadership to ID, or to the most
                                       up-to-date voter
  snapshot save FILE                   write a snapshot of the cluster's tables
  snapshot restore FILE                replace the tables with FILE's (disaster
                                       recovery: every write since FILE is lost)

--masters defaults to $DROVER_MASTERS; credentials as for drover client
(--ca-cert, --token-file, $DROVER_CACERT, $DROVER_TOKEN_FILE, $DROVER_TOKEN).
Exit codes: 0 success, 1 refused or bad usage, 2 no leader within --timeout.
`

func runOperator(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("drover operator", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, operatorUsage) }
	connect := addConnectFlags(fs)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() < 2 {
		fmt.Fprint(stderr, operatorUsage)
		return 1
	}
	// A snapshot can be as large as the tables and take a while to cut.
	k, err := connect(client.Options{RequestTimeout: 5 * time.Minute, MaxResponseBytes: api.MaxSnapshotBytes}, stdout, stderr, fs.Args()[2:])
	if err != nil {
		fmt.Fprintln(stderr, "drover:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	group, sub, rest := fs.Arg(0), fs.Arg(1), fs.Args()[2:]
	switch group + " " + sub {
	case "raft list-peers":
		return k.listPeers(ctx, rest)
	case "raft add-voter":
		return k.addVoter(ctx, rest)
	case "raft remove-peer":
		return k.removePeer(ctx, rest)
	case "raft transfer-leadership":
		return k.transferLeadership(ctx, rest)
	case "snapshot save":
		return k.snapshotSave(ctx, rest)
	case "snapshot restore":
		return k.snapshotRestore(ctx, rest)
	}
	fmt.Fprintf(stderr, "drover operator: unknown command %q (see drover operator --help)\n", group+" "+sub)
	return 1
}

func (k *cli) printPeers(p *api.RaftPeers) {
	tw := tabwriter.NewWriter(k.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tHTTP\tSUFFRAGE\tSTATE")
	for _, s := range p.Peers {
		state := "follower"
		if s.Leader {
			state = "leader"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.RaftAddr, s.HTTPAddr, s.Suffrage, state)
	}
	_ = tw.Flush()
}

func (k *cli) listPeers(ctx context.Context, args []string) int {
	fs := k.flags("raft list-peers")
	stale := fs.Bool("stale", false, "ask any master for its own view (works without a leader)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	var p *api.RaftPeers
	err := k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.RaftPeers(ctx, *stale); return err })
	if err != nil {
		return k.exitFor(err)
	}
	k.printPeers(p)
	return 0
}

func (k *cli) addVoter(ctx context.Context, args []string) int {
	fs := k.flags("raft add-voter")
	id := fs.String("id", "", "the new master's --id")
	addr := fs.String("address", "", "the new master's Raft address, host:raft-port")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *id == "" || *addr == "" {
		return k.exitFor(errors.New("add-voter needs --id and --address"))
	}
	var p *api.RaftPeers
	err := k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.AddVoter(ctx, *id, *addr); return err })
	if err != nil {
		return k.exitFor(err)
	}
	k.printPeers(p)
	return 0
}

func (k *cli) removePeer(ctx context.Context, args []string) int {
	fs := k.flags("raft remove-peer")
	id := fs.String("id", "", "the master to remove")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *id == "" {
		return k.exitFor(errors.New("remove-peer needs --id"))
	}
	var p *api.RaftPeers
	err := k.call(ctx, func(ctx context.Context) (err error) { p, err = k.c.RemovePeer(ctx, *id); return err })
	if err != nil {
		return k.exitFor(err)
	}
	k.printPeers(p)
	return 0
}

func (k *cli) transferLeadership(ctx context.Context, args []string) int {
	fs := k.flags("raft transfer-leadership")
	id := fs.String("id", "", "the voter to hand leadership to (default: the most up-to-date one)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
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
	if err := fs.Parse(args); err != nil {
		return flagError(err)
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
	if err := fs.Parse(args); err != nil {
		return flagError(err)
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
	k.printPeers(p)
	return 0
}
