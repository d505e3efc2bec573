// Command jepsen is Drover's chaos and failover suite: it runs a real
// cluster as OS processes inside a private network namespace, drives it
// with concurrent clients while injecting faults, records the history and
// checks it. Run as root from the repository root:
//
//	go run ./jepsen --nemesis kill,partition,pause --time 60s --seed 7
//	go run ./jepsen --schedules 20     # 20 randomized schedules, one after another
//	go run ./jepsen --cron --time 20s  # cron schedules in the workload, checked by schedule-slots
//
// It writes a run folder per schedule under --out and prints one line per
// checker, then VALID or INVALID with the seed that replays the schedule;
// with --schedules, a last line counts them and names the invalid seeds.
// It exits 0 when every checker of every schedule passes, 1 when one fails,
// 2 when a run could not be made.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/jepsen/nemesis"
	"github.com/drover-project/drover/jepsen/suite"
	"github.com/drover-project/drover/tests/testcluster"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg suite.Config
	fs := pflag.NewFlagSet("jepsen", pflag.ContinueOnError)
	nem := fs.String("nemesis", "kill,partition,pause", "fault families, comma-separated: "+strings.Join(nemesis.Families, ", ")+"; none for no faults")
	fs.DurationVar(&cfg.Time, "time", 60*time.Second, "how long clients and faults run, before the heal and the drain")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule and the clients' choices (default: random, printed); with --schedules, the first one's")
	schedules := fs.Int("schedules", 1, "how many schedules to run one after another, each with a seed of its own (--seed, --seed+1, ...; random without --seed)")
	fs.IntVar(&cfg.Masters, "masters", 3, "masters (3 or 5)")
	fs.IntVar(&cfg.Workers, "workers", 3, "workers")
	fs.IntVar(&cfg.Clients, "clients", 6, "concurrent clients")
	fs.BoolVar(&cfg.Namespaces, "namespaces", false, "apply namespaces etl, ml and adhoc with quotas and urgent (weight 2, preempts), spread submissions over them and default on 4-core workers, record every committed row change and check quotas and preemptions")
	fs.BoolVar(&cfg.Cron, "cron", false, "create four schedules (@every 2s allow, */3 s forbid of 4 s runs, @every 2s replace, @every 2s with a 1s starting deadline) before the faults, let clients ask them for manual runs, suspend them before the drain, record every committed row change and check that each slot fired at most once and every slot is accounted")
	fs.BoolVar(&cfg.Strict, "strict", false, "run with --fencing strict (no overlapping attempts allowed at all)")
	fs.StringVar(&cfg.Isolation, "isolation", "auto", "the workers' --isolation: auto, cgroups (every attempt in a cgroup, or no run) or none")
	fs.StringVar(&cfg.Out, "out", "jepsen/store", "folder for run folders")
	fs.DurationVar(&cfg.Drain, "drain", 90*time.Second, "wait after the heal for every driver to end; it goes on while drivers still end (one every 30s), up to 3 times this")
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
	if *schedules < 1 {
		fmt.Fprintf(os.Stderr, "jepsen: --schedules must be at least 1, got %d\n", *schedules)
		return 2
	}
	if *nem != "none" {
		cfg.Nemesis = strings.Split(*nem, ",")
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
	var invalid []string
	ran := 0
	for i := range *schedules {
		if ctx.Err() != nil {
			break
		}
		cfg.Seed = *seed + uint64(i)
		if *seed == 0 {
			cfg.Seed = rand.Uint64N(1 << 31)
		}
		if *schedules > 1 {
			fmt.Printf("schedule %d of %d, seed %d\n", i+1, *schedules, cfg.Seed)
		}
		valid, err := runOne(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "jepsen:", err)
			return 2
		}
		ran++
		if !valid {
			invalid = append(invalid, strconv.FormatUint(cfg.Seed, 10))
		}
	}
	if *schedules > 1 {
		fmt.Printf("%d of %d schedules run: %d valid, %d invalid", ran, *schedules, ran-len(invalid), len(invalid))
		if len(invalid) > 0 {
			fmt.Printf(" (seeds %s)", strings.Join(invalid, ", "))
		}
		fmt.Println()
	}
	switch {
	case len(invalid) > 0:
		return 1
	case ran < *schedules:
		return 2 // interrupted before every schedule ran
	}
	return 0
}

// runOne runs the schedule of cfg.Seed and prints its checkers' lines, its
// run folder and VALID or INVALID; the error says it could not be run.
func runOne(ctx context.Context, cfg suite.Config) (valid bool, err error) {
	out, err := suite.Run(ctx, cfg)
	if out != nil {
		for _, r := range out.Results {
			fmt.Println(r.Line())
		}
		fmt.Println("run folder:", out.Dir)
	}
	if err != nil {
		return false, err
	}
	if !out.Valid {
		fmt.Printf("INVALID: replay with --seed %d\n", out.Seed)
		return false, nil
	}
	fmt.Printf("VALID (seed %d)\n", out.Seed)
	return true, nil
}
