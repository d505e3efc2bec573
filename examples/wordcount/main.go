// Command wordcount counts the words in every regular file under the given
// directories and prints the most frequent ones, "COUNT WORD" per line,
// most frequent first (ties in byte order of the word). A word is a maximal
// run of Unicode letters, lower-cased. It is Drover's example driver: real
// work on real input, with a result that is easy to check.
//
// Without --executors it counts in one process. With --executors N it is a
// Spark-style driver: it registers a Drover application whose N executors
// run this same binary as "wordcount executor" (a binary shipped with
// drover client submit --upload reaches the executors the same way, as the
// driver's artifacts), cuts the input into shards
// and serves them to the executors over HTTP (protocol.go), merging their
// counts. Either way it prints the same top words on stdout and the same
// summary line on stderr, with a SHA-256 digest of the whole count. (A
// directory named "executor" must be written ./executor.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "executor" {
		return executorMain(ctx, args[1:])
	}
	fl := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	top := fl.Int("top", 20, "how many words to print")
	executors := fl.Int("executors", 0, "count on this many Drover executors (0: in this process)")
	cores := fl.Int("executor-cores", 1, "cores of each executor, one shard at a time per core")
	memory := sizeFlag{mb: 256}
	fl.Var(&memory, "executor-memory", "memory of each executor, like 256m or 1g")
	shards := fl.Int("shards", 0, "shards to cut the input into (0: 4 per executor core)")
	listen := fl.String("listen", "127.0.0.1:0", "address of the driver's HTTP server, for its executors")
	name := fl.String("name", "wordcount", "application name")
	fl.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wordcount [--top N] [--executors N [--executor-cores C] [--executor-memory SIZE] [--shards S]] DIR...")
		fmt.Fprintln(os.Stderr, "       wordcount executor   (run by Drover, with WORDCOUNT_DRIVER set)")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() == 0 || *top < 1 || *executors < 0 || *cores < 1 || *shards < 0 {
		fl.Usage()
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "wordcount: "+strings.TrimRight(format, "\n")+"\n", a...)
	}

	var res *jobResult
	var err error
	if *executors == 0 {
		res, err = countLocal(fl.Args())
	} else {
		var exe string
		var staged bool
		var cl *droverCluster
		if exe, err = os.Executable(); err == nil {
			exe, staged = executorProgram(exe)
			cl, err = newDroverCluster(logf)
		}
		if err == nil {
			start := time.Now()
			res, err = runDriver(ctx, driverConfig{
				Roots: fl.Args(), Name: *name, Executors: *executors, Cores: *cores,
				MemoryMB: memory.mb, Shards: *shards, Listen: *listen, Executable: exe, DriverArtifacts: staged,
			}, cl, logf)
			if err == nil {
				st := res.Status
				logf("%d shards in %v: %d requeued, %d speculative copies, %d duplicate results, %d executors lost",
					st.Shards, time.Since(start).Round(time.Millisecond), st.Requeued, st.Speculative, st.Duplicates, st.LostExecutors)
			}
		}
	}
	if err != nil {
		logf("%v", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, summary(res.Files, res.Counts))
	for _, wc := range Top(res.Counts, *top) {
		fmt.Printf("%d %s\n", wc.Count, wc.Word)
	}
	return 0
}

// countLocal is the single-process mode.
func countLocal(roots []string) (*jobResult, error) {
	files, err := listFiles(roots)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	if err := countFiles(files, counts); err != nil {
		return nil, err
	}
	return &jobResult{Files: len(files), Counts: counts}, nil
}

// executorMain runs an executor from the environment Drover gives it.
func executorMain(ctx context.Context, args []string) int {
	fl := flag.NewFlagSet("wordcount executor", flag.ContinueOnError)
	patience := fl.Duration("patience", 30*time.Second, "exit once the driver has been unreachable this long")
	if err := fl.Parse(args); err != nil || fl.NArg() > 0 {
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "wordcount executor: "+format+"\n", a...)
	}
	driver := os.Getenv(envDriver)
	id, err := strconv.Atoi(os.Getenv("DROVER_EXECUTOR_ID"))
	if driver == "" || err != nil {
		logf("needs %s and DROVER_EXECUTOR_ID in its environment", envDriver)
		return 2
	}
	slots := 1
	if c, err := strconv.Atoi(os.Getenv("DROVER_EXECUTOR_CORES")); err == nil && c > 0 {
		slots = min(c, 256)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	err = runExecutor(ctx, executorConfig{
		Driver: driver, ID: id, Slots: slots, Patience: *patience,
		HTTP: &http.Client{Transport: tr, Timeout: time.Minute},
		Logf: logf,
	})
	if err != nil {
		logf("%v", err)
		return 1
	}
	return 0
}

// sizeFlag is a memory size in MiB, written like Spark's: 512m, 4g.
type sizeFlag struct{ mb int64 }

func (s *sizeFlag) String() string { return strconv.FormatInt(s.mb, 10) + "m" }

func (s *sizeFlag) Set(v string) error {
	t := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(v)), "b")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'm':
			t = t[:n-1]
		case 'g':
			mult, t = 1024, t[:n-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 || n > 1<<40/mult {
		return errors.New("want a size like 256m or 2g")
	}
	s.mb = n * mult
	return nil
}

// executorProgram is how executors name this binary. One staged into the
// driver's working directory (drover client submit --upload) is on no
// other worker: the executors get it staged into theirs, from the driver's
// artifacts, and run it as ./NAME. Any other path is taken to be on every
// worker.
func executorProgram(exe string) (argv0 string, staged bool) {
	wd, err := os.Getwd()
	if err == nil {
		wd, err = filepath.EvalSymlinks(wd)
	}
	if err == nil && filepath.Dir(exe) == wd {
		return "./" + filepath.Base(exe), true
	}
	return exe, false
}
