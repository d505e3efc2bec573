// Command probe is the program the chaos suite's drivers run (package
// probe has the whole of it): "probe --dir DIR --run DURATION
// [--fail-first N]". It is a binary of its own, built without the race
// detector whatever the suite is built with: it checks nothing of
// Drover's, and dozens of race-instrumented copies starting at once
// starved the workers of a two-core machine.
package main

import (
	"os"

	"github.com/drover-project/drover/jepsen/probe"
)

func main() { os.Exit(probe.Main(os.Args[1:])) }
