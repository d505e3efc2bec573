// Command jepsen is Drover's chaos and failover suite: it runs a real
// cluster as OS processes inside a private network namespace, drives it
// with concurrent clients while injecting faults, records the history and
// checks it. Run as root from the repository root:
//
//	go run ./jepsen --nemesis kill,partition,pause --time 60s --seed 7
//
// It writes a run folder under --out and prints one line per checker; it
// exits 0 when every checker passes, 1 when one fails (printing the seed
// that replays the schedule), 2 when it could not run.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/internal/testcluster"
	"github.com/drover-project/drover/jepsen/nemesis"
	"github.com/drover-project/drover/jepsen/probe"
	"github.com/drover-project/drover/jepsen/suite"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe.Main(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	var cfg suite.Config
	fs := pflag.NewFlagSet("jepsen", pflag.ContinueOnError)
	nem := fs.String("nemesis", "kill,partition,pause", "fault families, comma-separated: "+strings.Join(nemesis.Families, ", ")+"; none for no faults")
	fs.DurationVar(&cfg.Time, "time", 60*time.Second, "how long clients and faults run, before the heal and the drain")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule and the clients' choices (default: random, printed)")
	fs.IntVar(&cfg.Masters, "masters", 3, "masters (3 or 5)")
	fs.IntVar(&cfg.Workers, "workers", 3, "workers")
	fs.IntVar(&cfg.Clients, "clients", 6, "concurrent clients")
	fs.BoolVar(&cfg.Strict, "strict", false, "run with --fencing strict (no overlapping attempts allowed at all)")
	fs.StringVar(&cfg.Isolation, "isolation", "auto", "the workers' --isolation: auto, cgroups (every attempt in a cgroup, or no run) or none")
	fs.StringVar(&cfg.Out, "out", "jepsen/store", "folder for run folders")
	fs.DurationVar(&cfg.Drain, "drain", 90*time.Second, "longest wait after the heal for every driver to end")
	tags := fs.String("build-tags", "", "build drover with these tags (drover_bug_early_relaunch injects a known bug)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		return 2
	}
	if !suite.InNetns() {
		code, err := suite.Reexec()
		if err != nil {
			fmt.Fprintln(os.Stderr, "jepsen:", err)
			return 2
		}
		return code
	}
	if *nem != "none" {
		cfg.Nemesis = strings.Split(*nem, ",")
	}
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64N(1 << 31)
	}
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	bin, err := testcluster.Build(*tags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jepsen:", err)
		return 2
	}
	defer os.RemoveAll(filepath.Dir(bin))
	cfg.Binary = bin
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out, err := suite.Run(ctx, cfg)
	if out != nil {
		for _, r := range out.Results {
			fmt.Println(r.Line())
		}
		fmt.Println("run folder:", out.Dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jepsen:", err)
		return 2
	}
	if !out.Valid {
		fmt.Printf("INVALID: replay with --seed %d\n", out.Seed)
		return 1
	}
	fmt.Printf("VALID (seed %d)\n", out.Seed)
	return 0
}
