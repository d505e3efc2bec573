// Package cgrouptest reads a unit's cgroup files, for the tests of the
// worker and of whole clusters that check what a cgroup holds a program
// to.
package cgrouptest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-project/drover/worker/isolation"
)

// Dir is the directory of ref's cgroup in the hierarchy of controller
// (memory, cpu, pids) on v1, its only directory on v2.
func Dir(ref isolation.Ref, controller string) string {
	if ref.Version == 2 {
		return filepath.Join(ref.Root, ref.Path)
	}
	return filepath.Join(ref.Root, controller, ref.Paths[controller])
}

// ReadFile returns the trimmed content of the file name in ref's cgroup
// of controller, failing t when it cannot be read.
func ReadFile(t testing.TB, ref isolation.Ref, controller, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(ref, controller), name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// AssertMemoryLimit checks that ref's cgroup has a hard memory limit of
// mb MiB (memory.max on v2, memory.limit_in_bytes on v1).
func AssertMemoryLimit(t testing.TB, ref isolation.Ref, mb int) {
	t.Helper()
	name := "memory.limit_in_bytes"
	if ref.Version == 2 {
		name = "memory.max"
	}
	if got := ReadFile(t, ref, "memory", name); got != strconv.Itoa(mb<<20) {
		t.Fatalf("%s = %q, want the unit's %d MiB", name, got, mb)
	}
}
