package restsubmit

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A Launcher is the argv template a CreateSubmissionRequest becomes a
// driver program through (a master's --spark-launcher). It is an argv, never
// a shell line: each element is one argument, and placeholders are replaced
// by values from the request, never re-read, split or interpreted.
//
// Scalar placeholders may appear anywhere inside any element but the first:
//
//	{{appResource}}   the request's appResource: its staged path ("./app.jar")
//	                  when it is an http(s):// or file: URL the worker
//	                  stages, else as given (hdfs://, local:, a path)
//	{{mainClass}}     the request's mainClass
//	{{appName}}       spark.app.name
//	{{driverCores}}   the driver's cores, e.g. 1
//	{{driverMemory}}  the driver's memory in MiB with an m, e.g. 1024m
//
// List placeholders must be a whole element, which becomes zero or more
// arguments:
//
//	{{appArgs}}       the request's appArgs, one argument each
//	{{sparkConf}}     --conf key=value for each Spark property, by key,
//	                  except spark.master and spark.submit.deployMode
//
// spark.master is left out because it names this REST listener, which no
// Spark driver can register an application with; spark.submit.deployMode
// because a driver launched through spark-submit with cluster mode would
// submit itself again.
//
// The first element, the program, must be literal: the operator chooses the
// program, a request fills in its arguments. (A caller allowed to submit can
// run any argv through Drover's own API anyway, so this is not a security
// boundary; it keeps the listener doing what its configuration says.)
type Launcher struct{ argv []string }

// DefaultLauncher is the launcher of a master given none. Spark's worker
// runs a driver as java ... org.apache.spark.deploy.worker.DriverWrapper
// WORKER_URL USER_JAR MAIN_CLASS ARGS, but DriverWrapper exits unless it
// can reach a Spark worker's RPC endpoint at WORKER_URL, which Drover
// workers do not have. spark-submit in client mode runs the same main class
// of the same jar with the same properties and heap in the driver's own
// process, which is what the driver of a cluster-mode submission is.
//
// The driver runs with a local master of as many threads as the cores it
// was given (its cgroup holds it to them): local[*] would start a thread
// per core of the worker and share the driver's few among them.
var DefaultLauncher = []string{
	"spark-submit", "--deploy-mode", "client", "--master", "local[{{driverCores}}]", "--class", "{{mainClass}}",
	"--driver-memory", "{{driverMemory}}", "{{sparkConf}}", "{{appResource}}", "{{appArgs}}",
}

const (
	phAppResource  = "appResource"
	phMainClass    = "mainClass"
	phAppName      = "appName"
	phDriverCores  = "driverCores"
	phDriverMemory = "driverMemory"
	phAppArgs      = "appArgs"
	phSparkConf    = "sparkConf"
)

var (
	scalarPlaceholders = map[string]bool{phAppResource: true, phMainClass: true, phAppName: true, phDriverCores: true, phDriverMemory: true}
	listPlaceholders   = map[string]bool{phAppArgs: true, phSparkConf: true}
	placeholderRE      = regexp.MustCompile(`\{\{([^{}]*)\}\}`)
)

// NewLauncher checks a template and returns its Launcher; an empty argv is
// DefaultLauncher.
func NewLauncher(argv []string) (Launcher, error) {
	if len(argv) == 0 {
		argv = DefaultLauncher
	}
	if argv[0] == "" {
		return Launcher{}, errors.New("the program (first element) is empty")
	}
	if strings.Contains(argv[0], "{{") || strings.Contains(argv[0], "}}") {
		return Launcher{}, fmt.Errorf("the program %q must be literal, without placeholders", argv[0])
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return Launcher{}, fmt.Errorf("element %d contains a NUL byte", i)
		}
		for _, m := range placeholderRE.FindAllStringSubmatch(a, -1) {
			name := m[1]
			switch {
			case listPlaceholders[name] && a != m[0]:
				return Launcher{}, fmt.Errorf("%s expands to a list and must be a whole element, not part of %q", m[0], a)
			case !listPlaceholders[name] && !scalarPlaceholders[name]:
				return Launcher{}, fmt.Errorf("unknown placeholder %s in %q (known: %s)", m[0], a, knownPlaceholders())
			}
		}
		// A brace pair left over is a mistyped placeholder; refusing it
		// beats passing "{{mainclass}" to every driver.
		if rest := placeholderRE.ReplaceAllString(a, ""); strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			return Launcher{}, fmt.Errorf("unbalanced braces in %q", a)
		}
	}
	return Launcher{argv: slices.Clone(argv)}, nil
}

func knownPlaceholders() string {
	names := slices.Sorted(maps.Keys(scalarPlaceholders))
	names = append(names, slices.Sorted(maps.Keys(listPlaceholders))...)
	for i, n := range names {
		names[i] = "{{" + n + "}}"
	}
	return strings.Join(names, " ")
}

// SplitLauncher parses the --spark-launcher flag: a JSON array of strings
// (for arguments with spaces), or else words separated by white space. No
// quoting, escaping or expansion happens: it is not a shell line. The
// result is checked as NewLauncher does; "" is DefaultLauncher.
func SplitLauncher(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	var argv []string
	if strings.HasPrefix(s, "[") {
		dec := json.NewDecoder(strings.NewReader(s))
		if err := dec.Decode(&argv); err != nil {
			return nil, fmt.Errorf("not a JSON array of strings: %v", err)
		}
		if dec.More() {
			return nil, errors.New("trailing data after the JSON array")
		}
		if len(argv) == 0 {
			return nil, errors.New("the JSON array is empty")
		}
	} else {
		argv = strings.Fields(s)
	}
	if len(argv) == 0 {
		return slices.Clone(DefaultLauncher), nil
	}
	if _, err := NewLauncher(argv); err != nil {
		return nil, err
	}
	return argv, nil
}

// Argv returns the template.
func (l Launcher) Argv() []string { return slices.Clone(l.argv) }

// launch is what a request fills a Launcher with.
type launch struct {
	appResource, mainClass, appName string
	appArgs                         []string
	cores                           int
	memoryMB                        int64
	// props are the request's Spark properties.
	props map[string]string
}

// sparkConf is the {{sparkConf}} list: --conf key=value by key.
func (v launch) sparkConf() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(v.props)) {
		if k == "spark.master" || k == "spark.submit.deployMode" {
			continue
		}
		out = append(out, "--conf", k+"="+v.props[k])
	}
	return out
}

// expand fills the template in one pass: a value that itself looks like a
// placeholder is passed on as it is.
func (l Launcher) expand(v launch) []string {
	scalars := map[string]string{
		phAppResource: v.appResource, phMainClass: v.mainClass, phAppName: v.appName,
		phDriverCores: strconv.Itoa(v.cores), phDriverMemory: strconv.FormatInt(v.memoryMB, 10) + "m",
	}
	out := make([]string, 0, len(l.argv)+len(v.appArgs))
	for _, a := range l.argv {
		switch a {
		case "{{" + phAppArgs + "}}":
			out = append(out, v.appArgs...)
			continue
		case "{{" + phSparkConf + "}}":
			out = append(out, v.sparkConf()...)
			continue
		}
		out = append(out, placeholderRE.ReplaceAllStringFunc(a, func(m string) string {
			return scalars[m[2:len(m)-2]]
		}))
	}
	return out
}
