// Command drover is Drover's one binary: masters, workers, the client CLI
// and a local development cluster are its subcommands.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: drover <command> [flags]

commands:
  master   run a master (a Raft voter and the cluster's API)
  worker   run a worker (runs drivers)
  client   submit, watch, kill and list drivers
  operator change the Raft quorum, hand over leadership, save and restore snapshots
  dev      run a whole local cluster (3 masters, 2 workers) in one command
  tls      make the cluster CA and role certificates for mutual TLS
  keygen   print a random key: a gossip key, a raft key or an API token

Run "drover <command> --help" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "master":
		return runMaster(args[1:])
	case "worker":
		return runWorker(args[1:])
	case "client":
		return runClient(args[1:], os.Stdout, os.Stderr)
	case "operator":
		return runOperator(args[1:], os.Stdout, os.Stderr)
	case "dev":
		return runDev(args[1:])
	case "tls":
		return runTLS(args[1:], os.Stdout, os.Stderr)
	case "keygen":
		return runKeygen(args[1:], os.Stdout, os.Stderr)
	case runnerCommand:
		return runRunner(args[1:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "drover: unknown command %q\n\n%s", args[0], usage)
	return 2
}
