package restsubmit

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// Spark's defaults for a driver that names no cores, memory or supervision
// (ClientArguments.DEFAULT_CORES, DEFAULT_MEMORY, DEFAULT_SUPERVISE).
const (
	DefaultDriverCores    = 1
	DefaultDriverMemoryMB = 1024
)

// droppedEnv are environment variables a submission may carry but a driver
// never gets. SPARK_LOCAL_IP and SPARK_LOCAL_HOSTNAME describe the
// submitting machine, and Spark's server drops them; SPARK_ENV_LOADED,
// SPARK_HOME and SPARK_CONF_DIR are what Spark's client leaves out, since
// they are wrong on another machine, and are dropped here too for clients
// (older Spark, curl) that send them: the worker's own take their place.
var droppedEnv = map[string]bool{
	"SPARK_LOCAL_IP": true, "SPARK_LOCAL_HOSTNAME": true,
	"SPARK_ENV_LOADED": true, "SPARK_HOME": true, "SPARK_CONF_DIR": true,
}

// translate checks a create request as Spark's CreateSubmissionRequest
// validation and StandaloneSubmitRequestServlet do, and makes the Drover
// submission: the launcher's argv, spark.driver.cores, spark.driver.memory
// (the heap, in the argv) plus its overhead (driverOverheadMB: the
// memory the driver is placed by and held to), spark.driver.supervise, spark.driver.resource.{name}.amount,
// spark.app.name, Drover's own spark.drover.user (UserProperty),
// spark.drover.namespace and spark.drover.priority (placement) and the
// environment, with a fresh token. Checks Drover's API makes itself (names, environment names) are
// left to it, so that they are made in one place.
func (h *Handler) translate(req CreateSubmissionRequest) (api.SubmitRequest, error) {
	var out api.SubmitRequest
	if req.ClientSparkVersion == nil {
		return out, errors.New("field clientSparkVersion is missing")
	}
	if req.SparkProperties == nil {
		return out, errors.New("field sparkProperties is missing")
	}
	if req.AppResource == nil {
		return out, errors.New("field appResource is missing")
	}
	props := make(map[string]string, len(req.SparkProperties))
	for k, v := range req.SparkProperties {
		props[k] = *v
	}
	name, ok := props["spark.app.name"]
	if !ok {
		return out, errors.New("property spark.app.name is missing")
	}
	supervise := false
	if v, ok := props["spark.driver.supervise"]; ok {
		b, err := parseBool(v)
		if err != nil {
			return out, fmt.Errorf("property spark.driver.supervise: %v", err)
		}
		supervise = b
	}
	cores := DefaultDriverCores
	if v, ok := props["spark.driver.cores"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return out, fmt.Errorf("property spark.driver.cores %q is not a positive whole number", v)
		}
		if n > model.MaxCores {
			return out, fmt.Errorf("property spark.driver.cores %d exceeds %d, more than any worker offers", n, model.MaxCores)
		}
		cores = n
	}
	// Checked as Spark checks it, though Drover has no use for it: a
	// request Spark refuses is refused here too.
	if v, ok := props["spark.executor.memory"]; ok {
		if _, err := MemoryMB(v); err != nil {
			return out, fmt.Errorf("property spark.executor.memory: %v", err)
		}
	}
	memory := int64(DefaultDriverMemoryMB)
	if v, ok := props["spark.driver.memory"]; ok {
		mb, err := MemoryMB(v)
		if err != nil {
			return out, fmt.Errorf("property spark.driver.memory: %v", err)
		}
		if mb <= 0 {
			return out, fmt.Errorf("property spark.driver.memory %q is under 1 MiB (a number without a unit is bytes, as in Spark)", v)
		}
		memory = mb
	}
	overhead, err := driverOverheadMB(props, memory)
	if err != nil {
		return out, err
	}
	if memory+overhead > model.MaxMemoryMB {
		return out, fmt.Errorf("spark.driver.memory (%d MiB) plus its overhead (%d MiB) is too large: at most %d MiB", memory, overhead, model.MaxMemoryMB)
	}
	if req.MainClass == nil {
		return out, errors.New("field mainClass is missing")
	}
	args := make([]string, len(req.AppArgs))
	for i, a := range req.AppArgs {
		args[i] = *a
	}
	resource, artifacts, err := stageResources(*req.AppResource, props)
	if err != nil {
		return out, err
	}
	custom, err := driverResources(props)
	if err != nil {
		return out, err
	}
	namespace, priority, err := placement(props)
	if err != nil {
		return out, err
	}
	appCores, err := appCores(props)
	if err != nil {
		return out, err
	}
	var env map[string]string
	for k, v := range req.EnvironmentVariables {
		if droppedEnv[k] {
			continue
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = *v
	}
	out = api.SubmitRequest{
		Token: h.newToken(),
		Name:  name,
		DriverSpec: model.DriverSpec{
			Argv: h.launcher.expand(launch{
				appResource: resource, mainClass: *req.MainClass, appName: name,
				appArgs: args, cores: cores, memoryMB: memory, props: props,
			}),
			Env:       env,
			Cores:     cores,
			MemoryMB:  memory + overhead,
			Supervise: supervise,
			Artifacts: artifacts,
			Resources: custom,
			User:      props[UserProperty],
			Namespace: namespace,
			Priority:  priority,
			AppCores:  appCores,
		},
	}
	return out, nil
}

// appCores returns the most cores the app's executors will hold (the
// driver's model.DriverSpec.AppCores), from Spark's spark.cores.max (the
// app's cap), spark.executor.instances times spark.executor.cores (its
// executors' count and size), or the smaller of the two when both are
// given; 0, unknown, when neither is. Each property, and the product,
// must be a whole number from 0 to model.MaxAppCores
// (spark.executor.cores from 1), as
// Spark's int configs must be whole; a non-number is refused as Spark's
// CreateSubmissionRequest refuses a non-numeric spark.cores.max. The
// error names the property.
func appCores(props map[string]string) (int, error) {
	whole := func(key string, least int) (int, bool, error) {
		v, ok := props[key]
		if !ok {
			return 0, false, nil
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || math.IsNaN(f) {
			return 0, false, fmt.Errorf("property %s %q is not a number", key, v)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < least || n > model.MaxAppCores {
			return 0, false, fmt.Errorf("property %s %q is not a whole number from %d to %d", key, v, least, model.MaxAppCores)
		}
		return n, true, nil
	}
	capped, hasCap, err := whole("spark.cores.max", 0)
	if err != nil {
		return 0, err
	}
	instances, hasInstances, err := whole("spark.executor.instances", 0)
	if err != nil {
		return 0, err
	}
	cores, hasCores, err := whole("spark.executor.cores", 1)
	if err != nil {
		return 0, err
	}
	if !hasInstances || !hasCores {
		return capped, nil
	}
	// Both are at most 2^20, so the product fits an int64.
	all := int64(instances) * int64(cores)
	if all > model.MaxAppCores {
		return 0, fmt.Errorf("spark.executor.instances %d times spark.executor.cores %d exceeds %d cores", instances, cores, model.MaxAppCores)
	}
	if hasCap {
		return min(capped, int(all)), nil
	}
	return int(all), nil
}

// UserProperty is the Spark property that names the user a driver runs
// as (api.SubmitRequest's User). Spark has none: its standalone worker
// runs every driver as itself, and spark-submit's --proxy-user is for
// YARN and Kubernetes. It is checked by Drover's API, as names are.
const UserProperty = "spark.drover.user"

// NamespaceProperty and PriorityProperty are the Spark properties that
// name a driver's namespace and priority (api.SubmitRequest's Namespace
// and Priority, model.DriverSpec). Spark has neither: its standalone
// master has one FIFO queue.
const (
	NamespaceProperty = "spark.drover.namespace"
	PriorityProperty  = "spark.drover.priority"
)

// placement returns the namespace and priority props name: "" and nil
// for those they do not. A namespace that is not a name, or a priority
// that is not a whole number from 0 to model.MaxPriority, is an error
// naming the property. Whether the namespace exists, grants the caller
// and allows the priority is the service's to say, as for any
// submission.
func placement(props map[string]string) (namespace string, priority *int, err error) {
	if v, ok := props[NamespaceProperty]; ok {
		if err := model.CheckNamespace(v); err != nil {
			return "", nil, fmt.Errorf("property %s: %v", NamespaceProperty, err)
		}
		namespace = v
	}
	if v, ok := props[PriorityProperty]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "", nil, fmt.Errorf("property %s %q is not a whole number", PriorityProperty, v)
		}
		if err := model.CheckPriority(n); err != nil {
			return "", nil, fmt.Errorf("property %s: %v", PriorityProperty, err)
		}
		priority = &n
	}
	return namespace, priority, nil
}

// driverResourcePrefix begins Spark's driver resource properties,
// spark.driver.resource.{name}.{amount,discoveryScript,vendor}.
const driverResourcePrefix = "spark.driver.resource."

// driverResources reads the custom resources a driver asks for from
// spark.driver.resource.{name}.amount, as Spark's
// ResourceUtils.parseAllResourceRequests does: a whole number, an amount
// of 0 asking for nothing; a negative or fractional one is refused, and a
// name must be one Drover's workers can offer (model.CheckResourceName).
// The discoveryScript and vendor properties are the worker's business in
// Drover, which hands out addresses itself, and are passed on unread.
// Nil when none is asked for.
func driverResources(props map[string]string) (model.ResourceAmounts, error) {
	var out model.ResourceAmounts
	for key, v := range props {
		rest, ok := strings.CutPrefix(key, driverResourcePrefix)
		if !ok {
			continue
		}
		name, field, ok := strings.Cut(rest, ".")
		if !ok {
			return nil, fmt.Errorf("property %s names no field of resource %s (amount, discoveryScript or vendor)", key, rest)
		}
		if field != "amount" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("property %s %q is not a whole number of 0 or more", key, v)
		}
		if err := model.CheckResourceName(name); err != nil {
			return nil, fmt.Errorf("property %s: %v", key, err)
		}
		if n == 0 {
			continue
		}
		if out == nil {
			out = model.ResourceAmounts{}
		}
		out[name] = n
	}
	if err := model.CheckResourceAmounts(out); err != nil {
		return nil, fmt.Errorf("properties %s*: %v", driverResourcePrefix, err)
	}
	return out, nil
}

// Where the worker stages the spark.jars and spark.files entries it
// fetches, inside the driver's directory: apart from the appResource and
// from each other, so that a jar and a file of one name do not collide.
const (
	stagedJarsDir  = "jars"
	stagedFilesDir = "files"
)

// stageResources makes artifacts of the appResource and of the spark.jars
// and spark.files entries that are http://, https:// or file: URLs, as
// Spark's DriverRunner.downloadUserJar fetches the user's jar into the
// driver's directory, and returns the appResource as the driver sees it:
// its staged path ("./app.jar", relative to the driver's working
// directory) when staged, else as given (local:, hdfs:// and plain paths
// are the driver's to read). The staged entries of spark.jars and
// spark.files are rewritten in props the same way; an entry that repeats
// the appResource (spark-submit adds it to spark.jars) names its one
// staged copy. Nothing Spark stages is unpacked: spark.archives is left
// alone.
func stageResources(appResource string, props map[string]string) (string, []model.Artifact, error) {
	var artifacts []model.Artifact
	stage := func(source, dest string) (string, error) {
		if !stageable(source) {
			return source, nil
		}
		a := model.Artifact{Source: keepPacked(source), Dest: dest}
		n, err := model.NormalizeArtifact(a)
		if err != nil {
			return "", err
		}
		artifacts = append(artifacts, a)
		return "./" + n.Path(), nil
	}
	resource, err := stage(appResource, "")
	if err != nil {
		return "", nil, fmt.Errorf("field appResource: %v", err)
	}
	for _, p := range []struct{ key, dest string }{{"spark.jars", stagedJarsDir}, {"spark.files", stagedFilesDir}} {
		v, ok := props[p.key]
		if !ok || v == "" {
			continue
		}
		entries := strings.Split(v, ",")
		for i, e := range entries {
			e = strings.TrimSpace(e)
			if e == appResource && resource != appResource {
				entries[i] = resource
				continue
			}
			if entries[i], err = stage(e, p.dest); err != nil {
				return "", nil, fmt.Errorf("property %s: %v", p.key, err)
			}
		}
		props[p.key] = strings.Join(entries, ",")
	}
	return resource, artifacts, nil
}

// stageable says whether a Spark resource is a URL Drover stages.
func stageable(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "file:")
}

// keepPacked adds go-getter's archive=false to a URL that does not say:
// Spark hands jars and files to the driver as they are.
func keepPacked(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Query().Has("archive") {
		return s
	}
	base, frag, hasFrag := strings.Cut(s, "#")
	if u.RawQuery == "" {
		base += "?archive=false"
	} else {
		base += "&archive=false"
	}
	if hasFrag {
		return base + "#" + frag
	}
	return base
}

// parseBool accepts what Scala's String.toBoolean does: true or false in
// any case.
func parseBool(s string) (bool, error) {
	switch {
	case strings.EqualFold(s, "true"):
		return true, nil
	case strings.EqualFold(s, "false"):
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

// memoryUnits are Spark's size suffixes (JavaUtils.byteStringAs), in bytes.
var memoryUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40,
	"p": 1 << 50, "pb": 1 << 50,
}

// The properties of a driver's memory overhead, and Spark's defaults for
// them (config.DRIVER_MEMORY_OVERHEAD_FACTOR, DRIVER_MIN_MEMORY_OVERHEAD).
const (
	overheadProperty       = "spark.driver.memoryOverhead"
	overheadFactorProperty = "spark.driver.memoryOverheadFactor"
	minOverheadProperty    = "spark.driver.minMemoryOverhead"
	// DefaultOverheadFactor is the fraction of a driver's heap its
	// overhead is by default.
	DefaultOverheadFactor = 0.10
	// DefaultMinOverheadMB is the least overhead a driver gets by
	// default, in MiB.
	DefaultMinOverheadMB = 384
)

// driverOverheadMB is the memory a driver of memoryMB MiB of heap needs
// beside its heap (the JVM's metaspace, thread stacks, direct buffers, a
// Python process), in MiB, by Spark 4's rule for a cluster-mode driver on
// YARN and Kubernetes (YARN's Client, Kubernetes' BasicDriverFeatureStep):
// spark.driver.memoryOverhead when set, else
// max(spark.driver.memoryOverheadFactor x memoryMB, rounded down,
// spark.driver.minMemoryOverhead), defaults 0.10 and 384 MiB. Overhead
// sizes are Spark's sizes with MiB for a bare number (bytesConf(MiB)), so
// "384" is 384 MiB; a negative or non-size one is an error, as is a factor
// that is not a number above 0 (Spark's check; it sets no upper bound).
// Spark's standalone master has no overhead: its worker holds a driver to
// nothing, where Drover's cgroup holds it to its memory.
func driverOverheadMB(props map[string]string, memoryMB int64) (int64, error) {
	if v, ok := props[overheadProperty]; ok {
		mb, err := sizeMB(v, 1<<20)
		if err != nil {
			return 0, fmt.Errorf("property %s: %v", overheadProperty, err)
		}
		return mb, nil
	}
	factor := DefaultOverheadFactor
	if v, ok := props[overheadFactorProperty]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0) || math.IsInf(f, 1) {
			return 0, fmt.Errorf("property %s %q is not a number above 0", overheadFactorProperty, v)
		}
		factor = f
	}
	least := int64(DefaultMinOverheadMB)
	if v, ok := props[minOverheadProperty]; ok {
		mb, err := sizeMB(v, 1<<20)
		if err != nil {
			return 0, fmt.Errorf("property %s: %v", minOverheadProperty, err)
		}
		least = mb
	}
	byFactor := factor * float64(memoryMB)
	if byFactor > math.MaxInt32 {
		return 0, fmt.Errorf("property %s %v times spark.driver.memory (%d MiB) is too large", overheadFactorProperty, factor, memoryMB)
	}
	return max(int64(byFactor), least), nil
}

// MemoryMB parses a Spark size (spark.driver.memory) into MiB as Spark's
// Utils.memoryStringToMb does: a whole number with an optional unit b, k,
// m, g, t or p (or kb ... pb), any case; a number without a unit is bytes;
// the bytes are rounded down to MiB, so "1024k" is 1 and "4096" is 0.
// Fractions ("1.5g") are errors, as in Spark.
func MemoryMB(s string) (int64, error) { return sizeMB(s, 1) }

// sizeMB parses a Spark size into MiB, a number without a unit counting
// bare bytes: 1 for spark.driver.memory as the REST server reads it, 1<<20
// for the properties Spark declares bytesConf(ByteUnit.MiB).
func sizeMB(s string, bare int64) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	digits, unit := t[:i], t[i:]
	mult, ok := memoryUnits[unit]
	if unit == "" {
		mult = bare
	}
	if digits == "" || !ok {
		return 0, fmt.Errorf("%q is not a size like 512m or 2g", s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	mb := n * mult >> 20
	if mb > math.MaxInt32 {
		// Spark keeps driver memory in an Int of MiB.
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return mb, nil
}
