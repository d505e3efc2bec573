package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// clientUsage is drover client's help; %s is the default --timeout.
const clientUsage = `usage: drover client [--masters a,b,c] [--timeout D] <command> [flags]

commands (drover client help COMMAND, or COMMAND --help, for one's usage):
  submit [--supervise [--max-restarts N [--restart-window D]] [--reschedule-after K]]
         [--name NAME] [--driver-cores N] [--driver-memory SIZE] [--driver-resource NAME=N]...
         [--priority N] [--env K=V]... [--artifact URL]... [--upload FILE]... [--user NAME]
         [--wait] -- PROGRAM [ARGS...]
  status DRIVER_ID [--json]
  kill   DRIVER_ID
  list   [--state S]... [--name GLOB] [--worker W] [--schedule NAME] [--all-namespaces]
         [--page-size N] [--json]
                         the masters filter; pages print as they come
  logs   DRIVER_ID [--attempt N] [--stderr] [--follow]
  logs   APP_ID --executor N [--stderr] [--follow]
  leader                 print the leader master's ID
  apps   [--all-namespaces] [--json]
                         list applications
  app    APP_ID [--json] show an application and its executors
  kill-app APP_ID        kill an application and its executors
  watch  [ID...] [--kind K] [--index N] [--json]
                         print every change as it commits (the event stream);
                         with one driver ID, follow it and exit as --wait does
  schedule create NAME --cron SPEC [--time-zone ZONE] [--concurrency allow|forbid|replace]
         [--starting-deadline D] [--history N] [submit's flags] -- PROGRAM [ARGS...]
                         submit PROGRAM at every slot of SPEC, once per slot
  schedule list [--all-namespaces] [--json]
  schedule status NAME [--json]
                         next and last slots, counts, the drivers of its runs
  schedule suspend|resume|run|delete NAME
                         run: one run now; delete: its drivers go on
  help   [COMMAND]       print this, COMMAND's synopsis and flags, or a
                         group's verbs (help schedule)

The flags below go before the command or after it (drover client list
--masters a,b,c); given twice, the later wins.
  --masters a,b,c  master HTTP addresses (default $DROVER_MASTERS)
  --timeout D      how long to keep trying the masters, positive (default %s)
  --namespace NAME the namespace submit and schedule create submit into, and
                   list, apps and schedule list show
                   (default $DROVER_NAMESPACE, else default)
  --ca-cert F, --token-file F, --client-cert F, --client-key F, --bind IP
  --max-response-size SIZE  bound on one answer (default 64m); past it the
                   command fails naming it, never printing a cut answer

A secured cluster takes the CA from --ca-cert or $DROVER_CACERT and a token
from --token-file, $DROVER_TOKEN_FILE or $DROVER_TOKEN (drover dev prints
them); masters without tokens take a client certificate instead:
--client-cert and --client-key, or $DROVER_CLIENT_CERT and
$DROVER_CLIENT_KEY. --bind sets the source address.

Exit codes: 0 success (submit: the driver is RUNNING, or with --wait
FINISHED); 1 refused, failed or bad usage; 2 no master reachable or no
leader known within --timeout; 3 submit: no worker can hold the driver;
4 submit without --wait: accepted, but not RUNNING within --timeout, or
held back by its namespace's quota or driver share (said at once);
130 interrupted by Ctrl-C (SIGINT; 143 for SIGTERM): a submitted driver is
not killed, and stderr says how to follow or kill it. After 3, 4 and 130
the driver stays queued and its ID is the last line of stdout, as after 0.
`

// defaultTimeout is how long a command keeps trying the masters.
const defaultTimeout = 30 * time.Second

// connectFlags are the flags of every command that talks to the masters:
// their addresses, how long to keep trying, and the credentials. They are
// added to the flag set before the command and again to the command's own,
// over the same variables, so that they may be given on either side of the
// command and the later one wins.
type connectFlags struct {
	masters, bind, caCert, clientCert, clientKey, tokenFile string
	timeout                                                 time.Duration
	// maxResponse bounds one answer (client.Options.MaxResponseBytes).
	maxResponse bytesFlag
}

// newConnectFlags returns the flags' defaults, from the environment.
func newConnectFlags() *connectFlags {
	return &connectFlags{
		masters: os.Getenv("DROVER_MASTERS"), timeout: defaultTimeout, caCert: os.Getenv(client.EnvCACert),
		clientCert: os.Getenv(client.EnvClientCert), clientKey: os.Getenv(client.EnvClientKey), tokenFile: os.Getenv(client.EnvTokenFile),
	}
}

// add registers the flags on fs, each defaulting to its value so far.
func (f *connectFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.masters, "masters", f.masters, "comma-separated master HTTP addresses host:port")
	fs.DurationVar(&f.timeout, "timeout", f.timeout, "how long to keep trying the masters before giving up (exit 2); must be positive")
	fs.StringVar(&f.bind, "bind", f.bind, "source IP for connections to the masters")
	fs.StringVar(&f.caCert, "ca-cert", f.caCert, "PEM file of the cluster CA; turns on HTTPS")
	fs.StringVar(&f.clientCert, "client-cert", f.clientCert, "PEM file of a client certificate, for masters that take certificates instead of tokens")
	fs.StringVar(&f.clientKey, "client-key", f.clientKey, "PEM file of the client certificate's key")
	fs.StringVar(&f.tokenFile, "token-file", f.tokenFile, "file holding the API token (else $DROVER_TOKEN)")
	fs.Var(&f.maxResponse, "max-response-size", "bound on one answer of a master, as 64m; a larger answer is an error naming this bound, never cut short (lists come in pages: list --page-size)")
}

// pollInterval is how often submit and logs re-read a driver while waiting.
const pollInterval = 250 * time.Millisecond

// cli runs one command of drover client or drover operator. Its client
// exists once parse has read the command's flags.
type cli struct {
	c *client.Client
	// command is "drover client" or "drover operator", for usage lines.
	command string
	connect *connectFlags
	// base is the client's options before the flags complete them.
	base    client.Options
	timeout time.Duration
	stdout  io.Writer
	stderr  io.Writer
	// commands are the commands of command, whose --help flags shows.
	commands []command
	// signals is the context SIGINT or SIGTERM ends (interruptContext),
	// nil when none does; an error after it ended is the interruption's.
	signals context.Context
	// namespace is drover client's --namespace, which its commands take
	// as they take the connect flags; nil for drover operator, whose
	// token create has a --namespace of its own.
	namespace *string
	// namespaceFlag is whether --namespace was given before the command
	// (drover client --namespace etl list), not taken from
	// $DROVER_NAMESPACE.
	namespaceFlag bool
}

// newCLI returns the cli of command (named by fs) whose client starts from
// base, and adds the connect flags to fs, the flag set before the command.
func newCLI(fs *pflag.FlagSet, base client.Options, stdout, stderr io.Writer) *cli {
	k := &cli{command: fs.Name(), connect: newConnectFlags(), base: base, stdout: stdout, stderr: stderr}
	k.connect.maxResponse = bytesFlag{b: cmp.Or(base.MaxResponseBytes, client.DefaultMaxResponseBytes), min: 64 << 10}
	k.connect.add(fs)
	return k
}

// flags returns the flag set of one command, with the connect flags;
// its --help gives the command's synopsis and sentence (command).
func (k *cli) flags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(k.command+" "+name, pflag.ContinueOnError)
	fs.SetOutput(k.stdout)
	if c, ok := findCommand(k.commands, name); ok {
		fs.Usage = func() { usageOf(fs.Output(), k.command, c, fs) }
	}
	k.connect.add(fs)
	k.addNamespaceFlag(fs)
	return fs
}

// addNamespaceFlag registers drover client's --namespace on fs,
// defaulting to its value so far.
func (k *cli) addNamespaceFlag(fs *pflag.FlagSet) {
	if k.namespace != nil {
		fs.StringVar(k.namespace, "namespace", *k.namespace, "the namespace submit and schedule create submit into, and list, apps and schedule list show, a DNS label; $DROVER_NAMESPACE, when set, is the default")
	}
}

// listNamespace returns the namespace list and apps show, as a query's
// Namespace: "" with --all-namespaces, else --namespace. --all-namespaces
// and a --namespace given on the command line, before the command or
// after it, are refused together, since one would be ignored; a
// namespace from $DROVER_NAMESPACE gives way to --all-namespaces, as
// kubectl's context namespace does.
func (k *cli) listNamespace(fs *pflag.FlagSet, all bool) (string, error) {
	switch {
	case !all:
		return *k.namespace, nil
	case k.namespaceFlag || fs.Changed("namespace"):
		return "", errors.New("--all-namespaces and --namespace exclude each other: give one")
	}
	return "", nil
}

// parse parses a command's arguments, its own flags and the connect flags
// alike, and connects to the masters. When the command must stop there it
// returns false with the exit code: 0 after --help, 1 for a bad flag, a
// --timeout that is not positive, or unusable addresses or credentials.
func (k *cli) parse(fs *pflag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(k.stderr, err), false
	}
	if err := k.dial(); err != nil {
		return failTo(k.stderr, err), false
	}
	return 0, true
}

// dial makes the client from the connect flags.
func (k *cli) dial() error {
	f := k.connect
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", f.timeout)
	}
	if k.namespace != nil {
		if err := model.CheckNamespace(*k.namespace); err != nil {
			return fmt.Errorf("--namespace (or $%s): %v", client.EnvNamespace, err)
		}
	}
	opts, err := client.SecureOptions(f.caCert, f.clientCert, f.clientKey, f.tokenFile)
	if err != nil {
		return err
	}
	opts.BindIP = f.bind
	if k.namespace != nil {
		opts.Namespace = *k.namespace
	}
	opts.RequestTimeout, opts.MaxResponseBytes = k.base.RequestTimeout, f.maxResponse.b
	// A person waits on the command: after a leader's loss the next
	// leader answers within cliMaxRetry of its election, instead of the
	// library's one second meant for many workers at once.
	opts.RetryInterval, opts.MaxRetryInterval = cliRetry, cliMaxRetry
	c, err := client.New(strings.Split(f.masters, ","), opts)
	if err != nil {
		return fmt.Errorf("--masters (or $DROVER_MASTERS): %w", err)
	}
	k.c, k.timeout = c, f.timeout
	return nil
}

// cliRetry and cliMaxRetry are the CLI's pause between rounds of asking
// the masters when none answers with a leader, and the cap of its
// doubling.
const (
	cliRetry    = 25 * time.Millisecond
	cliMaxRetry = 150 * time.Millisecond
)

func runClient(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("drover client", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	// --help is asked for and goes to stdout; without a command the same
	// text is a usage error, on stderr.
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), clientUsage, defaultTimeout) }
	k := newCLI(fs, client.Options{}, stdout, stderr)
	k.namespace = new(cmp.Or(os.Getenv(client.EnvNamespace), model.DefaultNamespace))
	k.addNamespaceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(stderr, err)
	}
	k.namespaceFlag = fs.Changed("namespace")
	if fs.NArg() == 0 {
		fs.SetOutput(stderr)
		fs.Usage()
		return 1
	}
	ctx, stop := interruptContext(context.Background())
	defer stop()
	k.signals = ctx
	k.commands = clientCommands
	sub, rest := fs.Arg(0), fs.Args()[1:]
	if sub == helpCommand {
		return k.help(ctx, rest, fs.Usage)
	}
	if c, ok := findCommand(k.commands, sub); ok {
		return c.run(k, ctx, rest)
	}
	// The commands of a group are named by group and verb (schedule
	// create), as drover operator's are.
	if code, ok := runGroup(ctx, k, sub, rest); ok {
		return code
	}
	fmt.Fprintf(stderr, "drover client: unknown command %q (see drover client --help)\n", sub)
	return 1
}

// call runs one request with the client timeout.
func (k *cli) call(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	return f(ctx)
}

// driver reads one driver with the client timeout.
func (k *cli) driver(ctx context.Context, id string) (*model.Driver, error) {
	var d *model.Driver
	err := k.call(ctx, func(ctx context.Context) (err error) {
		d, err = k.c.Driver(ctx, id)
		return err
	})
	return d, err
}

// exitFor prints err as one line and maps it to the exit code: 128 plus
// the signal's number once SIGINT or SIGTERM ended the command (whatever
// err says then is the interruption's doing: "context canceled"), 2
// when no master gave an authoritative answer, 1 otherwise.
func (k *cli) exitFor(err error) int {
	if code, ok := k.interrupted(""); ok {
		return code
	}
	fmt.Fprintln(k.stderr, "drover:", errorLine(err))
	if errors.Is(err, client.ErrNoMaster) {
		return 2
	}
	return 1
}

// interrupted reports whether a signal ended the command; if so it
// prints "drover: interrupted (SIGINT)" and then what, if not "", on
// one line, and returns the exit code (interrupted.exitCode).
func (k *cli) interrupted(what string) (int, bool) {
	if k.signals == nil {
		return 0, false
	}
	i, ok := interruption(k.signals)
	if !ok {
		return 0, false
	}
	line := "drover: " + i.Error()
	if what != "" {
		line += ": " + what
	}
	fmt.Fprintln(k.stderr, line)
	return i.exitCode(), true
}

func (k *cli) submit(ctx context.Context, args []string) int {
	fs := k.flags("submit")
	sf := addSubmitFlags(fs)
	wait := fs.Bool("wait", false, "wait until the driver ends; exit 0 for FINISHED, 1 otherwise, 130 on Ctrl-C, which leaves the driver running (without it, submit returns once the driver runs, or with exit 4 after --timeout, or at once when its namespace's quota or driver share holds it back)")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(k.stderr, "drover: submit needs a program: drover client submit [flags] -- PROGRAM [ARGS...]")
		return 1
	}
	req, err := sf.request(fs, fs.Args())
	if err != nil {
		return k.exitFor(err)
	}
	req.Token = client.NewToken()
	if code := k.uploadInto(ctx, sf, &req, "nothing was submitted", nil); code != 0 {
		return code
	}
	// Without --wait, submit takes --timeout at most in all: it returns
	// once the driver runs, or when the time is up with where it stands.
	deadline := ctx
	if !*wait {
		var cancel context.CancelFunc
		deadline, cancel = context.WithTimeout(ctx, k.timeout)
		defer cancel()
	}
	var res api.SubmitResponse
	if err := k.call(deadline, func(ctx context.Context) (err error) {
		res, err = k.c.Submit(ctx, req)
		return err
	}); err != nil {
		// The request may have reached the leader before the signal:
		// its token is not kept, so a retry would make a second driver.
		if code, ok := k.interrupted("no master confirmed the submission before it; it may have been accepted: drover client list shows it"); ok {
			return code
		}
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stderr, "submitted %s\n", res.DriverID)
	// Without --wait, a driver its namespace holds back (its quota or
	// driver share reached) is reported at once: it waits for the
	// namespace's own work to end, which may take hours, as Nomad's job
	// run reports a blocked evaluation and returns.
	d, err := k.watch(deadline, res.DriverID, func(d *model.Driver) bool {
		return d.State.Terminal() || (!*wait && (d.State == model.DriverRunning || api.HeldByNamespace(d))) || api.Unplaceable(d)
	})
	fmt.Fprintln(k.stdout, res.DriverID)
	if code, ok := k.interrupted(stillThere(res.DriverID, d)); ok {
		return code
	}
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(deadline.Err(), context.DeadlineExceeded):
		where := "its state is unknown: no master answered"
		if d != nil {
			where = "it is " + progressLine(d)
		}
		fmt.Fprintf(k.stderr, "drover: %s was accepted but is not RUNNING after --timeout %s (%s); it stays queued: drover client status %s follows it, drover client kill %s drops it\n",
			res.DriverID, k.timeout, where, res.DriverID, res.DriverID)
		return exitNotRunning
	case err != nil:
		return k.exitFor(err)
	case !*wait && api.HeldByNamespace(d):
		fmt.Fprintf(k.stderr, "drover: %s was accepted and waits: %s; it stays queued until its namespace has room: drover client status %s follows it, drover client kill %s drops it\n",
			d.ID, d.Message, d.ID, d.ID)
		return exitNotRunning
	case api.Unplaceable(d):
		fmt.Fprintf(k.stderr, "drover: %s cannot be placed (%s); it stays queued until a worker that fits registers: drover client kill %s drops it\n",
			d.ID, d.Message, d.ID)
		return exitUnplaceable
	case d.State == model.DriverRunning || d.State == model.DriverFinished:
		return 0
	}
	return 1
}

// stillThere says that the driver id, last read as d (nil if it never
// was), goes on after the client stops watching it, and how to follow or
// kill it.
func stillThere(id string, d *model.Driver) string {
	state := "accepted"
	switch {
	case d != nil && d.State.Terminal():
		return fmt.Sprintf("%s is %s", id, d.State)
	case d != nil:
		state = "still " + string(d.State)
	}
	return fmt.Sprintf("%s is %s and was not killed: drover client status %s or drover client watch %s follows it, drover client kill %s kills it",
		id, state, id, id, id)
}

// uploadRate is the slowest transfer, in bytes a second, that an upload
// is given time for beyond --timeout: a submit whose masters all refuse or
// vanish still ends, while a large file on a slow link is not cut off.
const uploadRate = 1 << 20

// upload stores the files on the masters, after checking that their base
// names collide neither with each other nor with the URL artifacts
// (before anything is sent, so a clash costs no transfer), and returns
// the artifacts that name them. before, when not nil, is a last check
// of the command's, made after those and before the first file is sent;
// its error is the refusal. Each file gets --timeout plus a second per
// MiB. A refusal or failure is one line on stderr and its exit code.
func (k *cli) upload(ctx context.Context, files []string, artifacts []model.Artifact, before func(context.Context) error) ([]model.Artifact, int) {
	if len(files) == 0 {
		return nil, 0
	}
	all := slices.Clone(artifacts)
	sizes := make([]int64, len(files))
	for i, f := range files {
		fi, err := os.Stat(f)
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a regular file", f)
		}
		if err != nil {
			fmt.Fprintf(k.stderr, "drover: --upload: %v\n", err)
			return nil, 1
		}
		sizes[i] = fi.Size()
		// The digest is not known yet; any one stands for it here.
		all = append(all, model.Artifact{Upload: strings.Repeat("0", 64), Name: filepath.Base(f)})
	}
	if _, err := model.NormalizeArtifacts(all); err != nil {
		fmt.Fprintf(k.stderr, "drover: --upload: %v\n", err)
		return nil, 1
	}
	if before != nil {
		if err := before(ctx); err != nil {
			return nil, k.exitFor(err)
		}
	}
	var out []model.Artifact
	for i, f := range files {
		uctx, cancel := context.WithTimeout(ctx, k.timeout+time.Duration(sizes[i]/uploadRate)*time.Second)
		start := time.Now()
		a, err := k.c.Upload(uctx, f)
		cancel()
		if err != nil {
			return nil, k.exitFor(fmt.Errorf("--upload: %s: %w", f, err))
		}
		fmt.Fprintf(k.stderr, "uploaded %s (%d bytes, sha256 %s) in %s\n", f, sizes[i], a.Upload, time.Since(start).Round(time.Millisecond))
		out = append(out, a)
	}
	return out, 0
}

// restartBounds checks submit's restart flags as the master checks the
// bounds, in the flags' own terms: each given one positive, a window of
// a second or more and only with --max-restarts, and all only with
// --supervise. The result holds them in the request's units.
func restartBounds(fs *pflag.FlagSet, supervise bool, maxRestarts int, window time.Duration, reschedule int) (api.SubmitRequest, error) {
	var out api.SubmitRequest
	for _, f := range []struct {
		name string
		n    int
	}{{"max-restarts", maxRestarts}, {"reschedule-after", reschedule}} {
		switch {
		case !fs.Changed(f.name):
		case f.n < 1 || f.n > model.MaxRestartsLimit:
			return out, fmt.Errorf("--%s %d must be from 1 to %d", f.name, f.n, model.MaxRestartsLimit)
		case !supervise:
			return out, fmt.Errorf("--%s needs --supervise", f.name)
		}
	}
	if fs.Changed("restart-window") {
		switch {
		case window < time.Second:
			return out, fmt.Errorf("--restart-window %s must be at least 1s", window)
		case !fs.Changed("max-restarts"):
			return out, errors.New("--restart-window needs --max-restarts")
		}
	}
	out.MaxRestarts, out.RestartWindowMS, out.RescheduleAfter = maxRestarts, window.Milliseconds(), reschedule
	return out, model.CheckSupervision(supervise, out.MaxRestarts, out.RestartWindowMS, out.RescheduleAfter)
}

// Exit codes of submit beyond 0, 1 and 2: the driver was accepted (its ID
// is the last line of stdout, as always) and stays queued, but is not
// running. Neither is a refusal, so neither is 1; a script that treats 0
// as "it runs" is never told so wrongly.
const (
	// exitUnplaceable: no worker the cluster has could hold the driver
	// even when idle (api.ReasonUnplaceable); it runs only once a larger
	// worker registers.
	exitUnplaceable = 3
	// exitNotRunning: without --wait, the driver was not RUNNING within
	// --timeout (it waits for room, or its worker has not started it
	// yet), or its namespace holds it back (api.HeldByNamespace), which
	// submit reports at its first read.
	exitNotRunning = 4
)

// watch polls a driver until done says so, printing each change of state,
// attempt, worker, run count or message on stderr; on a terminal each line
// starts with the time since the watch began. It returns the last state
// read, also with the error that ended the watch (nil if none was read).
func (k *cli) watch(ctx context.Context, id string, done func(*model.Driver) bool) (*model.Driver, error) {
	var last string
	var seen *model.Driver
	start := time.Now()
	tty := isTerminal(k.stderr)
	for {
		d, err := k.driver(ctx, id)
		if err != nil {
			return seen, err
		}
		seen = d
		line := progressLine(d)
		if line != last {
			if tty {
				fmt.Fprintf(k.stderr, "%7s  ", "+"+time.Since(start).Round(100*time.Millisecond).String())
			}
			fmt.Fprintln(k.stderr, line)
			last = line
		}
		if done(d) {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// progressLine describes a driver's progress in one line: its state, the
// attempt once it is placed, the worker, the runs of a supervised attempt
// restarted in place, the exit code once it ended, and why it waits
// (for a worker, or for its staging: "fetching URL: connection refused,
// try 3, next in 4s") or ended.
func progressLine(d *model.Driver) string {
	line := fmt.Sprintf("%s %s", d.ID, d.State)
	if cur := d.CurrentAttempt(); cur != nil {
		line += fmt.Sprintf(" attempt %d", d.Attempt)
		if d.WorkerID != "" {
			line += " on " + d.WorkerID
		}
		if cur.Runs > 1 {
			line += fmt.Sprintf(" (run %d)", cur.Runs)
		}
	}
	if d.State.Terminal() && d.ExitCode != nil {
		line += fmt.Sprintf(", exit %d", *d.ExitCode)
	}
	if d.Message != "" && (d.State.Terminal() || d.WorkerID == "" || d.Staging) {
		line += ": " + d.Message
	}
	return line
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// oneID parses the positional driver ID of status, kill and logs.
func oneID(fs *pflag.FlagSet) (string, error) { return oneArg(fs, "DRIVER_ID") }

// oneArg returns the only positional argument, named what in the error.
func oneArg(fs *pflag.FlagSet, what string) (string, error) {
	if fs.NArg() != 1 {
		return "", fmt.Errorf("want exactly one %s, got %d arguments", what, fs.NArg())
	}
	return fs.Arg(0), nil
}

func (k *cli) status(ctx context.Context, args []string) int {
	fs := k.flags("status")
	asJSON := fs.Bool("json", false, "print the driver as one JSON object")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	id, err := oneID(fs)
	if err != nil {
		return k.exitFor(err)
	}
	d, err := k.driver(ctx, id)
	if err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(driverJSONOf(d))
	}
	printDriver(k.stdout, d, k.namespaceOf(ctx, d))
	return 0
}

// namespaceOf returns the settings of driver d's namespace when d asked
// for no priority, so that status can show the one the scheduler gives it
// (model.Namespace.Priority); nil when d named its own, or when the
// namespace cannot be read (deleted since, or not the caller's to read),
// and then status says how the default is found instead.
func (k *cli) namespaceOf(ctx context.Context, d *model.Driver) *model.Namespace {
	if d.Priority != nil {
		return nil
	}
	var st api.NamespaceStatus
	if err := k.call(ctx, func(ctx context.Context) (err error) {
		st, err = k.c.Namespace(ctx, model.NamespaceOf(d.Namespace))
		return err
	}); err != nil {
		return nil
	}
	return st.Namespace
}

// driverJSON is a driver as status --json and list --json print it: the
// API's row, with its submission token named for what it is. The API's
// "token" reads as a credential, but it is the key the submitting client
// made so that a retry finds the same driver (spark-rest-... for a Spark
// REST submission), and it grants nothing; scripts that correlate retries
// keep it under submission_token.
type driverJSON struct {
	*model.Driver
	// Token hides the row's own: of two fields with one JSON name the
	// outer wins, and being empty it is left out.
	Token           string `json:"token,omitempty"`
	SubmissionToken string `json:"submission_token,omitempty"`
}

func driverJSONOf(d *model.Driver) driverJSON { return driverJSON{Driver: d, SubmissionToken: d.Token} }

// printJSON prints v as indented JSON for a terminal or a pipe
// (jsonEncoder).
func (k *cli) printJSON(v any) int {
	if err := jsonEncoder(k.stdout, "").Encode(v); err != nil {
		return k.exitFor(err)
	}
	return 0
}

// jsonEncoder is how the client prints JSON: indented by two spaces,
// each line after the first starting with prefix, and without
// encoding/json's escapes of <, > and &, which are for JSON inside HTML
// and would print an argv's 2>&1 as 2\u003e\u00261.
func jsonEncoder(w io.Writer, prefix string) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	return enc
}

func fmtTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func fmtExit(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// printDriver prints d for status; ns is the settings of its namespace,
// which give the priority of a driver that asked for none (nil when not
// known).
func printDriver(w io.Writer, d *model.Driver, ns *model.Namespace) {
	fmt.Fprintf(w, "id:         %s\n", d.ID)
	if d.Name != "" {
		fmt.Fprintf(w, "name:       %s\n", d.Name)
	}
	fmt.Fprintf(w, "state:      %s\n", d.State)
	fmt.Fprintf(w, "namespace:  %s\n", model.NamespaceOf(d.Namespace))
	switch {
	case d.Priority != nil:
		fmt.Fprintf(w, "priority:   %d\n", *d.Priority)
	case ns != nil:
		fmt.Fprintf(w, "priority:   %d (the namespace's default)\n", ns.Priority(nil))
	default:
		fmt.Fprintf(w, "priority:   the namespace's default (%d, or its --priority-max if lower)\n", model.DefaultPriority)
	}
	if d.Schedule != "" {
		fmt.Fprintf(w, "schedule:   %s\n", d.Schedule)
		fmt.Fprintf(w, "slot:       %s\n", fmtTime(d.Slot))
	}
	worker, attempt := placement(d)
	fmt.Fprintf(w, "worker:     %s\n", worker)
	fmt.Fprintf(w, "attempt:    %s\n", attempt)
	fmt.Fprintf(w, "supervise:  %t\n", d.Supervise)
	if d.User != "" {
		fmt.Fprintf(w, "user:       %s\n", d.User)
	}
	fmt.Fprintf(w, "exit code:  %s\n", fmtExit(d.ExitCode))
	fmt.Fprintf(w, "resources:  %s, %d MiB", plural.Count(d.Cores, "core"), d.MemoryMB)
	if len(d.Resources) > 0 {
		fmt.Fprintf(w, ", %s", d.Resources)
	}
	fmt.Fprintln(w)
	if cur := d.CurrentAttempt(); cur != nil && len(cur.Resources) > 0 && !cur.State.Terminal() {
		fmt.Fprintf(w, "holds:      %s\n", cur.Resources)
	}
	if line := restartsLine(d, time.Now()); line != "" {
		fmt.Fprintf(w, "restarts:   %s\n", line)
	}
	fmt.Fprintf(w, "submitted:  %s\n", fmtTime(d.SubmittedAt))
	fmt.Fprintf(w, "program:    %q\n", d.Argv)
	if d.Message != "" {
		fmt.Fprintf(w, "message:    %s\n", d.Message)
	}
	if len(d.Attempts) == 0 {
		return
	}
	fmt.Fprintln(w, "attempts:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ATTEMPT\tWORKER\tSTATE\tSTARTED\tENDED\tEXIT\tRUNS\tHELD\tREASON")
	for _, a := range d.Attempts {
		held := a.Resources.String()
		if held == "" {
			held = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.Attempt, a.WorkerID, a.State,
			fmtTime(a.StartedAt), fmtTime(a.EndedAt), fmtExit(a.ExitCode), a.Runs, held, a.Reason)
	}
	tw.Flush()
}

// restartsLine describes a bounded supervised driver's restart bounds and
// the failed runs they count at now, by the clock of the machine that
// reads them; "" for an unbounded driver.
func restartsLine(d *model.Driver, now time.Time) string {
	if d.MaxRestarts == 0 && d.RescheduleAfter == 0 {
		return ""
	}
	var parts []string
	if d.MaxRestarts > 0 {
		failures := d.FailuresBefore(d.Attempt + 1)
		n := model.FailuresInWindow(failures, now.UnixMilli(), d.RestartWindowMS)
		within := "ever"
		if d.RestartWindowMS > 0 {
			within = "within " + (time.Duration(d.RestartWindowMS) * time.Millisecond).String()
		}
		parts = append(parts, fmt.Sprintf("%s counted, at most %s %s", plural.Count(n, "failed run"), plural.Count(d.MaxRestarts, "restart"), within))
	}
	if d.RescheduleAfter > 0 {
		parts = append(parts, fmt.Sprintf("another worker after %s in a row", plural.Count(d.RescheduleAfter, "failed run")))
	}
	return strings.Join(parts, "; ")
}

func (k *cli) kill(ctx context.Context, args []string) int {
	fs := k.flags("kill")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	id, err := oneID(fs)
	if err != nil {
		return k.exitFor(err)
	}
	if err := k.call(ctx, func(ctx context.Context) error { return k.c.Kill(ctx, id) }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "killed %s\n", id)
	return 0
}

func (k *cli) list(ctx context.Context, args []string) int {
	fs := k.flags("list")
	asJSON := fs.Bool("json", false, "print a JSON array of drivers")
	states := fs.StringArray("state", nil, "show only drivers in state S (SUBMITTED, RUNNING, ..., in any case); repeat it or give a comma list")
	name := fs.String("name", "", "show only drivers whose name matches GLOB (path.Match: *, ?, [a-z], \\ quotes)")
	worker := fs.String("worker", "", "show only drivers whose current attempt, or last one if they ended, is on worker W")
	all := fs.Bool("all-namespaces", false, "list the drivers of every namespace, not only --namespace's")
	sched := fs.String("schedule", "", "show only the drivers schedule NAME fired")
	pageSize := fs.Int("page-size", api.DefaultListLimit, "drivers a request asks the masters for; each page is printed as it comes (at most the masters' --max-list-page)")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(fmt.Errorf("list takes no arguments, got %q", fs.Args()))
	}
	q, err := listQuery(*states, *name, *worker, *pageSize)
	// Given empty, --schedule is refused rather than read as no filter,
	// which would list every driver.
	if err == nil && fs.Changed("schedule") {
		q.Schedule = *sched
		if err = model.CheckScheduleName(*sched); err != nil {
			err = fmt.Errorf("--schedule: %v", err)
		}
	}
	if err == nil {
		q.Namespace, err = k.listNamespace(fs, *all)
	}
	if err != nil {
		return k.exitFor(err)
	}
	// The masters filter and page; each page is printed before the next
	// is asked for, so the client holds one page, whatever the tables
	// hold, and --timeout bounds the wait for each page.
	var print func([]*model.Driver) error
	var end func() error
	if *asJSON {
		a := &jsonArray{w: k.stdout}
		print = func(ds []*model.Driver) error {
			for _, d := range ds {
				if err := a.add(driverJSONOf(d)); err != nil {
					return err
				}
			}
			return nil
		}
		end = a.end
	} else {
		tw := tabwriter.NewWriter(k.stdout, 2, 4, 2, ' ', 0)
		// Across namespaces each row says its own; within one the
		// table is as it always was.
		nsHead := ""
		if *all {
			nsHead = "NAMESPACE\t"
		}
		fmt.Fprintln(tw, nsHead+"ID\tNAME\tSTATE\tWORKER\tATTEMPT\tSUPERVISE\tEXIT\tSUBMITTED\tMESSAGE")
		print = func(ds []*model.Driver) error {
			for _, d := range ds {
				worker, attempt := placement(d)
				if *all {
					fmt.Fprintf(tw, "%s\t", model.NamespaceOf(d.Namespace))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\n", d.ID, d.Name, d.State, worker,
					attempt, d.Supervise, fmtExit(d.ExitCode), fmtTime(d.SubmittedAt), d.Message)
			}
			return tw.Flush()
		}
		end = func() error { return tw.Flush() }
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pageTimeout := time.AfterFunc(k.timeout, cancel)
	defer pageTimeout.Stop()
	err = k.c.ListDrivers(ctx, q, func(ds []*model.Driver) error {
		pageTimeout.Stop()
		defer pageTimeout.Reset(k.timeout)
		return print(ds)
	})
	if err == nil {
		err = end()
	}
	if err != nil {
		return k.exitFor(err)
	}
	return 0
}

// listQuery checks list's filters and makes the query the masters
// filter by: states, each --state a comma list of DriverState names in
// any case, a well-formed glob of at most api.MaxNameFilter bytes, a
// well-formed worker ID and a page size
// of at least one. The masters check them again; checked here, a typo
// is refused naming its flag before any request.
func listQuery(states []string, name, worker string, pageSize int) (api.ListQuery, error) {
	q := api.ListQuery{Name: name, Worker: worker, Limit: pageSize}
	for _, list := range states {
		for _, s := range strings.Split(list, ",") {
			st := model.DriverState(strings.ToUpper(strings.TrimSpace(s)))
			if !slices.Contains(model.DriverStates(), st) {
				return q, fmt.Errorf("--state %q is not a driver state; want one of %v", s, model.DriverStates())
			}
			if !slices.Contains(q.States, string(st)) {
				q.States = append(q.States, string(st))
			}
		}
	}
	if len(name) > api.MaxNameFilter {
		return q, fmt.Errorf("--name of %d bytes exceeds %d bytes", len(name), api.MaxNameFilter)
	}
	if _, err := path.Match(name, ""); err != nil {
		return q, fmt.Errorf("--name %q is not a glob (path.Match syntax): %v", name, err)
	}
	if worker != "" {
		if err := ids.CheckWorker(worker); err != nil {
			return q, fmt.Errorf("--worker: %v", err)
		}
	}
	if pageSize < 1 {
		return q, fmt.Errorf("--page-size %d must be at least 1", pageSize)
	}
	return q, nil
}

// jsonArray writes a JSON array a row at a time, the bytes printJSON
// writes for the whole array, so a list of any length is printed
// without being held.
type jsonArray struct {
	w io.Writer
	n int
}

// add writes one row.
func (a *jsonArray) add(v any) error {
	var b bytes.Buffer
	if err := jsonEncoder(&b, "  ").Encode(v); err != nil {
		return err
	}
	sep := ",\n  "
	if a.n == 0 {
		sep = "[\n  "
	}
	a.n++
	_, err := io.WriteString(a.w, sep+strings.TrimSuffix(b.String(), "\n"))
	return err
}

// end closes the array.
func (a *jsonArray) end() error {
	closing := "\n]\n"
	if a.n == 0 {
		closing = "[]\n"
	}
	_, err := io.WriteString(a.w, closing)
	return err
}

// placement is where a driver's current attempt is, as list and status
// show it: its worker, "(waiting)" while it waits for one, "-" when it
// ended without one; and its attempt number, "-" until that attempt is
// placed (a driver is submitted, and relaunched, under the number of an
// attempt that does not exist yet).
func placement(d *model.Driver) (worker, attempt string) {
	worker, attempt = d.WorkerID, "-"
	switch {
	case worker != "":
	case d.State.Terminal():
		worker = "-"
	default:
		worker = "(waiting)"
	}
	if d.CurrentAttempt() != nil {
		attempt = strconv.Itoa(d.Attempt)
	}
	return worker, attempt
}

func (k *cli) logs(ctx context.Context, args []string) int {
	fs := k.flags("logs")
	stderr := fs.Bool("stderr", false, "show stderr instead of stdout")
	follow := fs.Bool("follow", false, "keep printing new output until the driver (or executor) ends")
	executor := fs.Int("executor", -1, "show the logs of this executor of the application APP_ID instead")
	attempt := fs.Int("attempt", 0, "show this attempt of the driver, while its worker still holds it (default: the latest, and with --follow each next one)")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	what := "DRIVER_ID"
	if *executor >= 0 {
		what = "APP_ID"
	}
	id, err := oneArg(fs, what)
	if err != nil {
		return k.exitFor(err)
	}
	switch {
	case fs.Changed("attempt") && *executor >= 0:
		return k.exitFor(errors.New("--attempt is for a driver's attempts; an executor has one log"))
	case fs.Changed("attempt") && *attempt < 1:
		return k.exitFor(fmt.Errorf("--attempt %d: attempts are numbered from 1", *attempt))
	case *executor >= 0:
		return k.printLogs(ctx, *follow, k.executorLogs(id, *executor, *stderr))
	}
	return k.printLogs(ctx, *follow, k.driverLogs(id, *attempt, *stderr))
}

// logSource is one log stream: refresh reads its owner's state, saying
// whether it has ended and whether the stream starts over (a new
// attempt); read fetches the bytes from offset.
type logSource struct {
	refresh func(ctx context.Context) (ended, restart bool, err error)
	read    func(ctx context.Context, offset int64) ([]byte, client.LogInfo, error)
}

// driverLogs follows one attempt of a driver, or with attempt 0 its latest
// attempt, moving to the next attempt when it is relaunched.
func (k *cli) driverLogs(id string, attempt int, stderr bool) logSource {
	fixed := attempt != 0
	return logSource{
		refresh: func(ctx context.Context) (bool, bool, error) {
			d, err := k.driver(ctx, id)
			if err != nil {
				return false, false, err
			}
			if fixed {
				rec := d.AttemptRecord(attempt)
				return d.State.Terminal() || (rec != nil && rec.State.Terminal()), false, nil
			}
			restart := false
			if n := len(d.Attempts); n > 0 && d.Attempts[n-1].Attempt != attempt {
				if attempt != 0 {
					fmt.Fprintf(k.stderr, "--- attempt %d on %s ---\n", d.Attempts[n-1].Attempt, d.Attempts[n-1].WorkerID)
				}
				attempt, restart = d.Attempts[n-1].Attempt, true
			}
			return d.State.Terminal(), restart, nil
		},
		read: func(ctx context.Context, offset int64) ([]byte, client.LogInfo, error) {
			return k.c.Logs(ctx, id, stderr, offset, attempt)
		},
	}
}

// executorLogs follows one executor of an app.
func (k *cli) executorLogs(appID string, executor int, stderr bool) logSource {
	return logSource{
		refresh: func(ctx context.Context) (bool, bool, error) {
			var a api.AppStatus
			err := k.call(ctx, func(ctx context.Context) (err error) {
				a, err = k.c.AppStatus(ctx, appID)
				return err
			})
			if err != nil {
				return false, false, err
			}
			for _, e := range a.Executors {
				if e.ID == executor {
					return e.State.Terminal() || a.State.Terminal(), false, nil
				}
			}
			return true, false, nil
		},
		read: func(ctx context.Context, offset int64) ([]byte, client.LogInfo, error) {
			return k.c.ExecutorLogs(ctx, appID, executor, stderr, offset)
		},
	}
}

// printLogs prints a log stream, and with follow keeps printing until its
// owner has ended and nothing more comes. Bytes rotated away before they
// were read are said on stderr, and the stream goes on where it now
// starts.
func (k *cli) printLogs(ctx context.Context, follow bool, src logSource) int {
	var offset int64
	for {
		// Read the state before the bytes, so that once the owner is seen
		// ended, the read that follows has everything it wrote.
		ended, restart, err := src.refresh(ctx)
		if err != nil {
			return k.exitFor(err)
		}
		if restart {
			offset = 0
		}
		var b []byte
		var li client.LogInfo
		err = k.call(ctx, func(ctx context.Context) (err error) {
			b, li, err = src.read(ctx, offset)
			return err
		})
		// While following, a worker that is gone or an attempt not yet
		// placed is a pause, not the end: the driver may go on elsewhere.
		if err != nil && !(follow && !ended && isTransient(err)) {
			return k.exitFor(err)
		}
		if err == nil {
			if li.Start > offset {
				fmt.Fprintf(k.stderr, "--- bytes %d to %d were rotated away ---\n", offset, li.Start)
			}
			offset = li.Start
		}
		if _, err := k.stdout.Write(b); err != nil {
			return 1
		}
		offset += int64(len(b))
		if !follow || (ended && len(b) == 0) {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(pollInterval):
		}
	}
}

// isTransient reports whether a log read failed for a reason that may
// pass while the log's owner has not ended: no attempt placed yet, the
// worker unreachable, or the attempt's worker gone while the driver is
// relaunched elsewhere.
func isTransient(err error) bool {
	return errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrBadGateway) || errors.Is(err, api.ErrGone)
}

func (k *cli) leader(ctx context.Context, args []string) int {
	fs := k.flags("leader")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(errors.New("leader takes no arguments"))
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	for {
		st, err := k.c.State(ctx)
		if err != nil {
			return k.exitFor(err)
		}
		why := fmt.Sprintf("master %s knows no leader", st.ID)
		if st.Leader != "" {
			if why = k.unconfirmed(ctx, st); why == "" {
				fmt.Fprintln(k.stdout, st.Leader)
				return 0
			}
		}
		select {
		case <-ctx.Done():
			return k.exitFor(fmt.Errorf("%w: %s", client.ErrNoMaster, why))
		case <-time.After(pollInterval):
		}
	}
}

// unconfirmed asks the leader st names whether it leads, and says why not,
// "" when it does: its own health must name itself the leader with the
// leader check passing, which only the ready leader's does. The first
// master to answer may be a follower that has not yet noticed its
// leader's death, and would name the dead master for up to an election.
func (k *cli) unconfirmed(ctx context.Context, st *api.State) string {
	if st.LeaderHTTP == "" {
		return fmt.Sprintf("master %s names leader %s without its address", st.ID, st.Leader)
	}
	h, err := k.c.Health(ctx, st.LeaderHTTP)
	if err != nil {
		return fmt.Sprintf("master %s names leader %s, which does not answer: %v", st.ID, st.Leader, err)
	}
	for _, c := range h.Checks {
		if c.Name == api.CheckLeader && c.OK && h.ID == st.Leader && h.Leader == h.ID {
			return ""
		}
	}
	return fmt.Sprintf("master %s names leader %s, which does not confirm it (it names %q)", st.ID, st.Leader, h.Leader)
}
