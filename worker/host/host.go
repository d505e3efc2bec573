// Package host gives a worker the parts of its machine it manages beside
// its runners, in the shapes worker.Config takes: cgroups (package
// isolation) as worker.Isolation, and the artifact cache (package
// artifact) as worker.Artifacts. The worker links neither package, only
// the file contract it shares with its runners (package unitdir); the
// command that builds a worker links this one, as Nomad's client is
// given its drivers' plugins rather than linking their code.
package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/artifact"
	"github.com/drover-project/drover/worker/isolation"
)

// Isolation is worker.Isolation over package isolation.
type Isolation struct {
	// Mode is isolation.ModeAuto (also when empty): cgroups when the
	// machine allows, else one warning and none; isolation.ModeCgroups:
	// cgroups or no start; isolation.ModeNone: never.
	Mode isolation.Mode
	// Root is where the cgroup file systems are mounted; empty means
	// isolation.DefaultRoot.
	Root string
	// PidsLimit bounds the processes and threads of each unit
	// (pids.max); zero means isolation.DefaultPidsLimit, though Check
	// refuses it: a --pids-limit of 0 is a mistake, not a default.
	PidsLimit int64
}

// Check refuses a mode isolation does not know and a pids limit that is
// not positive, in one line naming the flag.
func (i Isolation) Check() error {
	if i.Mode != "" {
		if _, err := isolation.ParseMode(string(i.Mode)); err != nil {
			return err
		}
	}
	if i.PidsLimit <= 0 {
		return fmt.Errorf("--pids-limit %d must be positive", i.PidsLimit)
	}
	return nil
}

// OpenCgroups makes the worker's cgroup named name, as
// worker.Isolation's OpenCgroups says.
func (i Isolation) OpenCgroups(name string, log *slog.Logger) (worker.Cgroups, error) {
	if i.Mode == isolation.ModeNone {
		return nil, nil
	}
	m, err := isolation.New(isolation.Config{Name: name, Root: i.Root})
	switch {
	case err == nil:
		pids := i.PidsLimit
		if pids == 0 {
			pids = isolation.DefaultPidsLimit
		}
		return cgroups{m: m, pids: pids}, nil
	case i.Mode == isolation.ModeCgroups:
		return nil, fmt.Errorf("--isolation cgroups: %w", err)
	}
	log.Warn("isolation off: drivers and executors run without cgroups (no memory, CPU or process limits; a kill reaches their process groups only): " + err.Error())
	return nil, nil
}

// DestroyCgroup is isolation.Destroy of the cgroup a spec carries.
func (Isolation) DestroyCgroup(cgroup json.RawMessage, timeout time.Duration) error {
	ref, err := isolation.ParseRef(cgroup)
	if err != nil {
		return err
	}
	return isolation.Destroy(ref, timeout)
}

// CgroupPath is isolation.Ref's String of the cgroup a spec carries.
func (Isolation) CgroupPath(cgroup json.RawMessage) string {
	ref, err := isolation.ParseRef(cgroup)
	if err != nil {
		return string(cgroup)
	}
	return ref.String()
}

// cgroups is worker.Cgroups over an isolation.Manager, each unit's
// cgroup bounded to pids processes and threads.
type cgroups struct {
	m    *isolation.Manager
	pids int64
}

func (c cgroups) Create(unit string, memoryMB int64, cores int) (json.RawMessage, error) {
	ref, err := c.m.Create(unit, isolation.Limits{MemoryMB: memoryMB, Cores: cores, Pids: c.pids})
	if err != nil {
		return nil, err
	}
	return json.Marshal(ref)
}

func (c cgroups) Sweep(keep func(unit string) bool, timeout time.Duration) ([]string, error) {
	return c.m.Sweep(keep, timeout)
}

func (c cgroups) Remove() error  { return c.m.Remove() }
func (c cgroups) String() string { return c.m.String() }

// Artifacts is worker.Artifacts over package artifact's Cache.
type Artifacts struct{}

// OpenCache opens the cache in dir (artifact.OpenCache).
func (Artifacts) OpenCache(dir string) (worker.ArtifactCache, error) {
	c, err := artifact.OpenCache(dir)
	if err != nil {
		return nil, err
	}
	return cache{c}, nil
}

// cache is worker.ArtifactCache over an artifact.Cache.
type cache struct{ c *artifact.Cache }

func (c cache) Trim(maxBytes int64) (worker.CacheTrim, error) {
	res, err := c.c.Trim(maxBytes)
	return worker.CacheTrim(res), err
}

func (c cache) Free(ctx context.Context, bytes int64) (worker.CacheTrim, error) {
	res, err := c.c.Free(ctx, bytes)
	return worker.CacheTrim(res), err
}
