package worker

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/atomicfile"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

// EnvResourcesFile names the variable that gives a program holding custom
// resources the path of its resources file, in Spark's format (package
// resourcesfile), for spark.driver.resourcesFile or an executor's
// --resourcesFile.
const EnvResourcesFile = "DROVER_RESOURCES_FILE"

// CAFile is the name, in the work dir, of the worker's copy of the
// cluster CA's certificate, readable by every user (0644): the path
// programs get as DROVER_CACERT, whatever user they run as, while the
// operator's CA file may sit in a directory only the worker can read.
const CAFile = "ca.pem"

// envPattern is the form of an --env-allow entry: a variable name, or a
// prefix of one (possibly empty) ending in '*'.
var envPattern = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*|[A-Za-z0-9_]*\*)$`)

// envAllowed says whether the worker's own variable name passes to
// programs: Config.EnvAllow names it or a prefix of it, and it is not one
// of the worker's DROVER_ variables, which may hold its credentials.
func (rc *reconciler) envAllowed(name string) bool {
	if strings.HasPrefix(name, "DROVER_") {
		return false
	}
	return slices.ContainsFunc(rc.cfg.EnvAllow, func(p string) bool {
		prefix, ok := strings.CutSuffix(p, "*")
		return name == p || ok && strings.HasPrefix(name, prefix)
	})
}

// programEnv is the environment of o's program, run as a: the worker's
// own variables that Config.EnvAllow lets through (where Spark's
// CommandUtils passes on the worker's whole environment), then HOME, USER
// and LOGNAME of a's passwd entry, so that a program run as another user
// is not told root's home; then the submission's or app's environment;
// then the DROVER_ variables, which nothing before can override.
func (rc *reconciler) programEnv(o order, a account) []string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && rc.envAllowed(k) {
			env[k] = v
		}
	}
	if a.home != "" {
		env["HOME"], env["USER"], env["LOGNAME"] = a.home, a.Name, a.Name
	}
	maps.Copy(env, o.env)
	maps.Copy(env, o.vars)
	// As Spark hands a driver or an executor its addresses: one list per
	// resource, and the resources file (spark.driver.resourcesFile).
	for name, addrs := range o.resources {
		env[model.ResourceEnv(name)] = strings.Join(addrs, ",")
	}
	if len(o.resources) > 0 {
		env[EnvResourcesFile] = filepath.Join(o.key.dir(rc.cfg.WorkDir), unitdir.ResourcesFile)
	}
	env["DROVER_WORKER_ID"] = rc.cfg.ID
	env["DROVER_MASTERS"] = strings.Join(rc.cfg.Masters, ",")
	if rc.cfg.TLS.CA != "" {
		env[client.EnvCACert] = filepath.Join(rc.cfg.WorkDir, CAFile)
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// copyCA writes the cluster CA's certificate, read from the operator's
// file at path, into the work dir as CAFile, 0644, whole or not at all.
func copyCA(workDir, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return atomicfile.Replace(filepath.Join(workDir, CAFile), b, 0o644, false)
}
