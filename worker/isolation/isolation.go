// Package isolation runs each unit a worker starts (a driver attempt or an
// executor) in a control group of its own, as Nomad's exec driver and
// YARN's LinuxContainerExecutor do: a hard memory limit from the unit's
// memory, a CPU quota from its cores, a bound on its processes, its
// out-of-memory kills counted by the kernel, and a kill that reaches every
// process the unit ever started, setsid or not.
//
// It speaks both cgroup versions through containerd's cgroups library
// (github.com/containerd/cgroups/v3): the unified hierarchy (v2) and the
// per-controller hierarchies of v1, as the machine mounts them. The
// library creates, limits, lists, freezes, measures and deletes; this
// package adds what it lacks: a start that puts the program in its cgroup
// before the program runs a single instruction (Cgroup.Start), a v1 kill
// that cannot hang on the freezer, and the layout of a worker's cgroups.
//
// The layout: a worker's cgroups live under the cgroup the worker was
// started in (on v2, its parent when that is a leaf named supervisor, the
// DelegateSubgroup of the systemd unit), at drover/WORKER/UNIT, where
// WORKER is the worker's ID and its work dir's instance, so that two
// workers on one machine never touch each other's, and UNIT names the
// driver attempt or executor. The runner that supervises a unit stays
// outside it, so an out-of-memory kill of the program leaves the runner
// alive to report it.
package isolation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/drover-project/drover/internal/strictjson"
)

// Mode is the worker's --isolation: ModeAuto, ModeCgroups or ModeNone.
type Mode string

const (
	// ModeAuto uses cgroups when the machine lets the worker make them,
	// and otherwise runs without, saying why in one warning line.
	ModeAuto Mode = "auto"
	// ModeCgroups refuses to start a worker that cannot make them.
	ModeCgroups Mode = "cgroups"
	// ModeNone never makes cgroups: cores and memory are bookkeeping
	// only, as in Spark's standalone worker, and a kill reaches the
	// program's process group alone.
	ModeNone Mode = "none"
)

// ParseMode returns the Mode s names, or an error naming the choices.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeCgroups, ModeNone:
		return m, nil
	}
	return "", fmt.Errorf("--isolation %q must be %s, %s or %s", s, ModeAuto, ModeCgroups, ModeNone)
}

// DefaultPidsLimit is the default bound on the processes and threads of
// one unit (pids.max): room for a JVM's few hundred threads many times
// over, close to systemd's default TasksMax of a service (15% of the
// kernel's default pid_max, 4915), and far below a fork bomb's reach.
const DefaultPidsLimit = 4096

// cpuPeriodMicros is the CFS period of the CPU quota, the kernel's
// default (100 ms): a unit of N cores may run N*100 ms in every 100 ms.
const cpuPeriodMicros = 100_000

// Limits are what a unit's cgroup enforces. A zero field sets no limit.
type Limits struct {
	// MemoryMB is the hard memory limit, MiB (memory.max on v2,
	// memory.limit_in_bytes on v1), swap included where the kernel
	// accounts swap: a unit over it is killed by the kernel.
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// Cores is the CPU quota, in cores: Cores*100 ms of CPU time in
	// every 100 ms period (cpu.max on v2, cpu.cfs_quota_us on v1).
	Cores int `json:"cores,omitempty"`
	// Pids bounds the unit's processes and threads (pids.max).
	Pids int64 `json:"pids,omitempty"`
}

func (l Limits) validate() error {
	if l.MemoryMB < 0 || l.Cores < 0 || l.Pids < 0 {
		return fmt.Errorf("negative cgroup limit (%d MiB, %d cores, %d pids)", l.MemoryMB, l.Cores, l.Pids)
	}
	return nil
}

// Ref names one unit's cgroup and the limits it was made with: what the
// worker writes into the runner's spec and reads back when it adopts the
// unit after a restart. Paths are from the root of their hierarchy, as in
// /proc/PID/cgroup.
type Ref struct {
	// Version is 1 or 2.
	Version int `json:"version"`
	// Root is where the cgroup file systems are mounted: on v2 the
	// unified hierarchy itself, on v1 the directory holding one mount
	// per controller (/sys/fs/cgroup).
	Root string `json:"root"`
	// Path is the cgroup's path on v2.
	Path string `json:"path,omitempty"`
	// Paths maps each v1 controller to the cgroup's path in its
	// hierarchy; they differ when the worker's own cgroups do.
	Paths map[string]string `json:"paths,omitempty"`
	// Limits are the limits the cgroup was made with.
	Limits Limits `json:"limits"`
}

// Check says whether r can name a cgroup of this package: the version
// known, paths absolute and clean, and nothing that would lead out of
// the hierarchies.
func (r Ref) Check() error {
	if !filepath.IsAbs(r.Root) || filepath.Clean(r.Root) != r.Root {
		return fmt.Errorf("cgroup root %q is not a clean absolute path", r.Root)
	}
	var paths []string
	switch r.Version {
	case 2:
		if len(r.Paths) > 0 {
			return errors.New("a v2 cgroup has no per-controller paths")
		}
		paths = []string{r.Path}
	case 1:
		if r.Path != "" || len(r.Paths) == 0 {
			return errors.New("a v1 cgroup has per-controller paths only")
		}
		for c, p := range r.Paths {
			if !v1Known(c) {
				return fmt.Errorf("unknown v1 controller %q", c)
			}
			paths = append(paths, p)
		}
	default:
		return fmt.Errorf("unknown cgroup version %d", r.Version)
	}
	for _, p := range paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("cgroup path %q is not a clean absolute path below the root", p)
		}
	}
	return r.Limits.validate()
}

// ParseRef decodes a Ref as a spec carries it (unitdir.Spec's Cgroup,
// written by the worker from Marshal's JSON) and checks it (Check):
// unknown fields and trailing data are refused.
func ParseRef(b []byte) (Ref, error) {
	var r Ref
	if err := strictjson.Decode(bytes.NewReader(b), &r); err != nil {
		return Ref{}, fmt.Errorf("cgroup: %v", err)
	}
	return r, r.Check()
}

// String is the cgroup's path for people: the v2 path, or the v1 memory
// controller's.
func (r Ref) String() string {
	if r.Version == 2 {
		return r.Path
	}
	if p, ok := r.Paths[string(ctrlMemory)]; ok {
		return p
	}
	b, _ := json.Marshal(r.Paths)
	return string(b)
}

// Usage is what a unit's cgroup measured over its life.
type Usage struct {
	// MemoryPeakBytes is the most memory the cgroup held at once
	// (memory.peak on v2, memory.max_usage_in_bytes on v1); 0 when the
	// kernel does not say.
	MemoryPeakBytes uint64
	// CPUMicros is the CPU time its processes used, user and system, in
	// microseconds (cpu.stat usage_usec on v2, cpuacct.usage on v1).
	CPUMicros uint64
	// OOMKills counts the processes the kernel killed for the memory
	// limit (memory.events oom_kill on v2, memory.oom_control oom_kill
	// on v1).
	OOMKills uint64
}

// OOMReason is the reason of an attempt or executor whose run ended with
// an out-of-memory kill at a limit of memoryMB MiB.
func OOMReason(memoryMB int64) string {
	return fmt.Sprintf("out of memory: killed at the %d MiB limit", memoryMB)
}

// checkName refuses a cgroup name that is empty, a path, or a name the
// kernel gives its own files.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") ||
		strings.HasPrefix(name, "cgroup.") {
		return fmt.Errorf("invalid cgroup name %q", name)
	}
	return nil
}

// explain turns the error of a first write under the cgroup hierarchy into
// the reason isolation is unavailable, in the words an operator looks
// for: not root, a read-only /sys/fs/cgroup.
func explain(what string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s: the cgroup file system is read-only (a container without a writable /sys/fs/cgroup?)", what)
	case errors.Is(err, os.ErrPermission) && os.Geteuid() != 0:
		return fmt.Errorf("%s: permission denied: not root, and no delegated cgroup (systemd Delegate=yes)", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}
