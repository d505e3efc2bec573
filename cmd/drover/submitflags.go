package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// submitFlags are the flags that describe one submission: the program's
// needs, environment, files, supervision, priority and user. submit
// takes them, and so does schedule create, each of whose runs is that
// submission made again; both read them through request, so a flag
// means the same in either.
type submitFlags struct {
	supervise                           *bool
	name, user                          *string
	cores, maxRestarts, reschedule      *int
	priority, appCores                  *int
	mem                                 sizeFlag
	envs, artifacts, uploads, resources *[]string
	window                              *time.Duration
}

// addSubmitFlags registers the submission flags on fs.
func addSubmitFlags(fs *pflag.FlagSet) *submitFlags {
	f := &submitFlags{mem: sizeFlag{mb: 1024, max: model.MaxMemoryMB}}
	f.supervise = fs.Bool("supervise", false, "relaunch the driver when it exits non-zero or its worker is lost")
	f.name = fs.String("name", "", "a name to show in status and list")
	f.cores = fs.Int("driver-cores", 1, fmt.Sprintf("cores the driver needs, from 1 to %d", model.MaxCores))
	fs.Var(&f.mem, "driver-memory", fmt.Sprintf("memory the driver needs (512m, 4g; a bare number is MiB, where Spark REST's spark.driver.memory takes bytes), at most %dm", model.MaxMemoryMB))
	f.envs = fs.StringArray("env", nil, "K=V to set in the driver's environment (repeatable)")
	f.artifacts = fs.StringArray("artifact", nil, "URL (http://, https://, file:///) of a file to stage in the driver's directory before it starts; ?checksum=sha256:HEX verifies it, archives (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz, .zip) are unpacked unless ?archive=false (repeatable)")
	f.uploads = fs.StringArray("upload", nil, "a local file to store on the masters and stage in the driver's directory under its base name, with its permission bits (repeatable)")
	f.resources = fs.StringArray("driver-resource", nil, "NAME=N: N addresses of the custom resource NAME (gpu=1), which the driver finds in $DROVER_RESOURCE_<NAME> and $DROVER_RESOURCES_FILE (Spark's spark.driver.resource.NAME.amount; repeatable)")
	f.maxRestarts = fs.Int("max-restarts", 0, "with --supervise: end the driver FAILED after more than N failed runs (within --restart-window); default unbounded")
	f.window = fs.Duration("restart-window", 0, "with --max-restarts: count only the failed runs of the last D (at least 1s); default every one")
	f.reschedule = fs.Int("reschedule-after", 0, "with --supervise: after K failed runs in a row on one worker, run the next attempt on another worker when one has room; default never")
	f.priority = fs.Int("priority", model.DefaultPriority, fmt.Sprintf("the driver's priority among its namespace's waiting drivers, 0 to %d, at most the namespace's --priority-max; unset, the default is lowered to that cap", model.MaxPriority))
	f.appCores = fs.Int("app-cores", 0, fmt.Sprintf("the most cores the driver's application's executors will hold together (Spark's spark.cores.max), 0 to %d; its namespace's driver share keeps room for them before it places the driver (default 0: unknown)", model.MaxAppCores))
	f.user = fs.String("user", "", "the user the program runs as, a name ([a-z_][a-z0-9_-]*, at most 32 bytes), never a uid; a worker runs it so only when its --allowed-users lists the name (default: each worker's --run-as)")
	return f
}

// request checks the flags as the masters check a submission, so that a
// typo is refused in one line naming its flag before any file is
// uploaded, and returns the submission of argv they describe, without
// a token and without the --upload files (uploadInto adds them).
func (f *submitFlags) request(fs *pflag.FlagSet, argv []string) (api.SubmitRequest, error) {
	var req api.SubmitRequest
	if *f.cores < 1 || *f.cores > model.MaxCores {
		return req, fmt.Errorf("--driver-cores %d must be from 1 to %d", *f.cores, model.MaxCores)
	}
	if err := model.CheckPriority(*f.priority); err != nil {
		return req, fmt.Errorf("--priority: %v", err)
	}
	if *f.appCores < 0 || *f.appCores > model.MaxAppCores {
		return req, fmt.Errorf("--app-cores %d must be from 0 to %d", *f.appCores, model.MaxAppCores)
	}
	bounds, err := restartBounds(fs, *f.supervise, *f.maxRestarts, *f.window, *f.reschedule)
	if err != nil {
		return req, err
	}
	if err := model.CheckUser(*f.user); err != nil {
		return req, fmt.Errorf("--user: %v", err)
	}
	amounts := model.ResourceAmounts{}
	for _, r := range *f.resources {
		if err := model.ParseResourceAmount(amounts, r); err != nil {
			return req, fmt.Errorf("--driver-resource: %v", err)
		}
	}
	env := map[string]string{}
	for _, e := range *f.envs {
		key, val, ok := strings.Cut(e, "=")
		if !ok {
			return req, fmt.Errorf("--env %q is not K=V", e)
		}
		env[key] = val
	}
	req = api.SubmitRequest{
		Name: *f.name, DriverSpec: model.DriverSpec{
			Argv:            argv,
			Env:             env,
			Cores:           *f.cores,
			MemoryMB:        f.mem.mb,
			Supervise:       *f.supervise,
			MaxRestarts:     bounds.MaxRestarts,
			RestartWindowMS: bounds.RestartWindowMS,
			RescheduleAfter: bounds.RescheduleAfter,
			User:            *f.user,
			AppCores:        *f.appCores,
		},
	}
	if len(amounts) > 0 {
		req.Resources = amounts
	}
	if fs.Changed("priority") {
		req.Priority = f.priority
	}
	for _, a := range *f.artifacts {
		req.Artifacts = append(req.Artifacts, model.Artifact{Source: a})
	}
	normal, err := model.NormalizeArtifacts(req.Artifacts)
	if err != nil {
		return req, fmt.Errorf("--artifact: %v", err)
	}
	// The masters' own check of the spec, so that what they would refuse
	// (an environment name that is none, ...) is refused before any
	// --upload file is sent.
	spec := req.DriverSpec
	spec.Artifacts = normal
	if err := spec.Validate(); err != nil {
		return req, err
	}
	return req, nil
}

// uploadInto stores f's --upload files on the masters and adds them to
// req's artifacts. before, when not nil, runs once the files are checked
// and before the first is sent (upload). It returns 0, or the exit code
// once it has said why it stopped; nothing says, after an interruption,
// what did not happen ("nothing was submitted").
func (k *cli) uploadInto(ctx context.Context, f *submitFlags, req *api.SubmitRequest, nothing string, before func(context.Context) error) int {
	uploaded, code := k.upload(ctx, *f.uploads, req.Artifacts, before)
	if code, ok := k.interrupted(nothing); ok {
		return code
	}
	if code != 0 {
		return code
	}
	req.Artifacts = append(req.Artifacts, uploaded...)
	return 0
}
