package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/internal/devsecrets"
	"github.com/drover-project/drover/security/pki"
)

const tlsUsage = `usage: drover tls <command> [flags]

Makes the cluster CA and the certificates of masters, workers and clients
for mutual TLS. A certificate's role is one of its names (master.drover,
worker.drover, client.drover), so a worker's certificate cannot pass for a
master's although one CA signs both.

commands:
  ca    [--dir DIR] [--days N] [--name CN]
        write a new CA to DIR/ca.pem and DIR/ca-key.pem
  cert  --role master|worker|client [--name ID] [--host H]... [--ca ca.pem]
        [--ca-key ca-key.pem] [--dir DIR] [--days N]
        write a certificate signed by the CA (DIR/ca.pem and
        DIR/ca-key.pem unless --ca and --ca-key say otherwise) to
        DIR/NAME.pem and DIR/NAME-key.pem; a master's or worker's names
        its node's ID (--name, required), and masters let a worker
        certificate act as that one worker only

Both print the paths they wrote, one a line, write keys 0600 and never
overwrite a file. Exit codes: 0 success, 1 failure or bad usage.
Run "drover tls <command> --help" for a command's flags.
`

// runTLS runs "drover tls" and returns the exit code. It prints to the
// writers it is given rather than to os.Stdout and os.Stderr so tests can
// run it in-process.
func runTLS(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("drover tls", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprint(stdout, tlsUsage) }
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(stderr, err)
	}
	if fs.NArg() == 0 {
		return failTo(stderr, errors.New("tls: missing command, ca or cert (see drover tls --help)"))
	}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	switch sub {
	case "ca":
		return tlsCA(rest, stdout, stderr)
	case "cert":
		return tlsCert(rest, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, tlsUsage)
		return 0
	}
	return failTo(stderr, fmt.Errorf("tls: unknown command %q (see drover tls --help)", sub))
}

// subFlags is the flag set of one tls or keygen command; --help prints
// synopsis, about and the flags on stdout.
func subFlags(name, synopsis, about string, stdout io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("drover "+name, pflag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: %s\n\n%s\n", strings.TrimSpace("drover "+name+" "+synopsis), about)
		if fs.HasFlags() {
			fmt.Fprintln(stdout, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func tlsCA(args []string, stdout, stderr io.Writer) int {
	fs := subFlags("tls ca", "[--dir DIR] [--days N] [--name CN]",
		"Writes a new cluster CA (ECDSA P-256) to DIR/ca.pem and DIR/ca-key.pem and\n"+
			"prints their paths. Keep ca-key.pem off the nodes: whoever holds it can\n"+
			"make certificates of any role.", stdout)
	dir := fs.String("dir", ".", "directory to write to (created 0700 if missing)")
	days := fs.Int("days", 1825, "days the CA is valid; the certificates it signs cannot outlive it")
	name := fs.String("name", "Drover CA", "the CA's common name")
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(stderr, err)
	}
	if fs.NArg() != 0 {
		return failTo(stderr, fmt.Errorf("tls ca takes no arguments, got %q", fs.Args()))
	}
	validity, err := daysDuration(*days)
	if err != nil {
		return failTo(stderr, err)
	}
	certPEM, keyPEM, err := pki.NewCA(*name, validity)
	if err != nil {
		return failTo(stderr, err)
	}
	return writePair(*dir, "ca", certPEM, keyPEM, stdout, stderr)
}

func tlsCert(args []string, stdout, stderr io.Writer) int {
	fs := subFlags("tls cert", "--role master|worker|client [--name ID] [--host H]... [--ca ca.pem]\n"+
		"         [--ca-key ca-key.pem] [--dir DIR] [--days N]",
		"Writes a certificate of a role, signed by the CA, to DIR/NAME.pem and\n"+
			"DIR/NAME-key.pem and prints their paths. Masters and workers need one\n"+
			"each (their certificates both serve and dial); clients only dial.\n"+
			"\n"+
			"A master's or worker's certificate names the node's ID, its --id, as the\n"+
			"URI drover://ROLE/ID: masters let a worker certificate register,\n"+
			"heartbeat, report and decommission as that one worker only, and take\n"+
			"its logs only from it. --name gives the ID and is required for them;\n"+
			"a client's names only its files. Certificates made before IDs name\n"+
			"none: issue each node a new one (masters refuse unbound worker\n"+
			"certificates unless run with --allow-unbound-worker-certs).", stdout)
	roleName := fs.String("role", "", "master, worker or client (required)")
	hosts := fs.StringSlice("host", nil, "a DNS name or IP address the certificate is also valid for (repeatable, or comma-separated); master and worker certificates always hold localhost")
	caFile := fs.String("ca", "", "the CA certificate (default DIR/ca.pem)")
	caKeyFile := fs.String("ca-key", "", "the CA's private key (default DIR/ca-key.pem)")
	dir := fs.String("dir", ".", "directory to write to, and to find the CA in (created 0700 if missing)")
	name := fs.String("name", "", "a master's or worker's ID (its --id), which the certificate names and which also names the files; for a client, the file name without .pem (default drover-client)")
	days := fs.Int("days", 365, "days the certificate is valid")
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(stderr, err)
	}
	if fs.NArg() != 0 {
		return failTo(stderr, fmt.Errorf("tls cert takes no arguments, got %q", fs.Args()))
	}
	if *roleName == "" {
		return failTo(stderr, errors.New("tls cert: --role is required: master, worker or client"))
	}
	role, err := pki.ParseRole(*roleName)
	if err != nil {
		return failTo(stderr, fmt.Errorf("--role: %w", err))
	}
	// A master's or worker's name is its ID, bound into the certificate;
	// a client's only names the files.
	id := *name
	switch {
	case role == pki.RoleClient:
		id = ""
	case *name == "":
		return failTo(stderr, fmt.Errorf("tls cert: --name is required for a %s certificate: the %s's --id, which the certificate binds it to", role, role))
	}
	validity, err := daysDuration(*days)
	if err != nil {
		return failTo(stderr, err)
	}
	// The CA defaults to where "drover tls ca --dir DIR" put it, so one
	// --dir serves both commands.
	if *caFile == "" {
		*caFile = filepath.Join(*dir, "ca.pem")
	}
	if *caKeyFile == "" {
		*caKeyFile = filepath.Join(*dir, "ca-key.pem")
	}
	caPEM, err := os.ReadFile(*caFile)
	if err != nil {
		return failTo(stderr, fmt.Errorf("--ca: %w", err))
	}
	caKey, err := os.ReadFile(*caKeyFile)
	if err != nil {
		return failTo(stderr, fmt.Errorf("--ca-key: %w", err))
	}
	certPEM, keyPEM, err := pki.Issue(caPEM, caKey, role, id, *hosts, validity)
	if err != nil {
		return failTo(stderr, err)
	}
	if *name == "" {
		*name = "drover-client"
	}
	return writePair(*dir, *name, certPEM, keyPEM, stdout, stderr)
}

// writePair writes a certificate and key with pki.WriteFiles and prints
// their paths, one a line, for scripts to pick up.
func writePair(dir, name string, certPEM, keyPEM []byte, stdout, stderr io.Writer) int {
	certPath, keyPath, err := pki.WriteFiles(dir, name, certPEM, keyPEM)
	if err != nil {
		return failTo(stderr, err)
	}
	fmt.Fprintln(stdout, certPath)
	fmt.Fprintln(stdout, keyPath)
	return 0
}

// daysDuration turns --days into a duration, refusing what is not positive
// or would overflow time.Duration (about 290 years).
func daysDuration(days int) (time.Duration, error) {
	const maxDays = math.MaxInt64 / int64(24*time.Hour)
	if days <= 0 || int64(days) > maxDays {
		return 0, fmt.Errorf("--days %d: want 1 to %d", days, maxDays)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

// runKeygen runs "drover keygen": one random key on stdout.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	fs := subFlags("keygen", "",
		"Prints 32 random bytes in standard base64: a gossip encryption key\n"+
			"(AES-256; --gossip-key-file), a raft key (--raft-key-file) or an API\n"+
			"token.", stdout)
	if err := fs.Parse(args); err != nil {
		return flagErrorTo(stderr, err)
	}
	if fs.NArg() != 0 {
		return failTo(stderr, fmt.Errorf("keygen takes no arguments, got %q", fs.Args()))
	}
	fmt.Fprintln(stdout, devsecrets.RandomKey())
	return 0
}

// flagErrorTo is flagError for commands that print to a given writer: 0 for
// --help (already printed), else one line and exit code 1.
func flagErrorTo(stderr io.Writer, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	return failTo(stderr, err)
}

// failTo is fail for commands that print to a given writer: err as one line
// and exit code 1.
func failTo(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "drover:", errorLine(err))
	return 1
}
