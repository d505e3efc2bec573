package isolation

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
)

// helperEnv makes the test binary act as a unit's program (see TestMain):
// "cgroup" prints its own /proc/self/cgroup and sleeps, "setsid" starts a
// setsid() grandchild that prints its PID and sleeps, "alloc" touches
// $HELPER_MB MiB, "spin" keeps $HELPER_THREADS threads busy.
const helperEnv = "ISOLATION_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "cgroup":
		b, _ := os.ReadFile("/proc/self/cgroup")
		os.Stdout.Write(b)
		os.Stdout.Close()
		time.Sleep(time.Hour)
	case "setsid":
		cmd := exec.Command("/bin/sleep", "3600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		fmt.Println(cmd.Process.Pid)
		os.Stdout.Close()
		time.Sleep(time.Hour)
	case "alloc":
		mb, _ := strconv.Atoi(os.Getenv("HELPER_MB"))
		var keep [][]byte
		for range mb {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println(len(keep))
		os.Exit(0)
	case "spin":
		n, _ := strconv.Atoi(os.Getenv("HELPER_THREADS"))
		for range n {
			go func() {
				for x := 0; ; x++ {
					_ = x
				}
			}()
		}
		time.Sleep(time.Hour)
	}
	os.Exit(2)
}

// needRoot skips t unless it runs as root on a machine with cgroups.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: making cgroups needs root (CI runs as root)")
	}
}

// testManager makes a manager for a worker named after the test, removed
// with its units at the end.
func testManager(t *testing.T, cfg Config, needControllers bool) *Manager {
	t.Helper()
	needRoot(t)
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	}
	m, err := newManager(cfg, needControllers)
	if err != nil {
		t.Skipf("skipped: no usable cgroups here: %v", err)
	}
	removeAtCleanup(t, m)
	return m
}

// removeAtCleanup has m's units and then its worker cgroup removed when
// t ends.
func removeAtCleanup(t *testing.T, m *Manager) {
	t.Cleanup(func() {
		if _, err := m.Sweep(func(string) bool { return false }, 5*time.Second); err != nil {
			t.Errorf("sweep: %v", err)
		}
		if err := m.Remove(); err != nil {
			t.Errorf("remove the worker's cgroup: %v", err)
		}
		if m.ref.exists() {
			t.Errorf("the worker's cgroup %s is still there", m.ref)
		}
	})
}

// sysManager is a manager on the machine's own hierarchy, with its
// controllers.
func sysManager(t *testing.T) *Manager {
	t.Helper()
	return testManager(t, Config{}, true)
}

// v2Manager is a manager on a v2 hierarchy without controllers: the
// machine's unified mount, or the empty one of a hybrid host.
func v2Manager(t *testing.T) *Manager {
	t.Helper()
	for _, root := range []string{DefaultRoot, filepath.Join(DefaultRoot, "unified")} {
		if v, err := versionAt(root); err == nil && v == 2 {
			return testManager(t, Config{Root: root}, false)
		}
	}
	t.Skip("skipped: no cgroup v2 hierarchy mounted")
	return nil
}

func helper(t *testing.T, kind string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+kind), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(out)
}

func startIn(t *testing.T, c *Cgroup, cmd *exec.Cmd) {
	t.Helper()
	if err := c.Start(cmd); err != nil {
		t.Fatalf("start in %s: %v", c.Ref(), err)
	}
}

func create(t *testing.T, m *Manager, unit string, l Limits) *Cgroup {
	t.Helper()
	r, err := m.Create(unit, l)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(r)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testPlacement checks that a program started in c reads its own cgroup
// as c from its first instructions on.
func testPlacement(t *testing.T, m *Manager, want func(r Ref) []string) {
	c := create(t, m, "driver-1-1", Limits{})
	cmd, out := helper(t, "cgroup")
	startIn(t, c, cmd)
	b, err := readAll(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range want(c.Ref()) {
		if !strings.Contains(b, line) {
			t.Errorf("program's /proc/self/cgroup lacks %q:\n%s", line, b)
		}
	}
	pids, err := c.Pids()
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Errorf("cgroup holds %v (%v), want the program %d alone", pids, err, cmd.Process.Pid)
	}
	// No thread of the starting process is left in the unit's cgroup
	// once Start has returned: a kill of the unit would reach it.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, _ := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "cgroup"))
		if strings.Contains(string(b), c.Ref().String()) {
			t.Errorf("thread %s of the starting process is in the unit's cgroup:\n%s", task.Name(), b)
		}
	}
}

func readAll(r *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		line, err := r.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			if sb.Len() > 0 {
				return sb.String(), nil
			}
			return "", err
		}
	}
}

func TestStartPlacesTheProgramV1(t *testing.T) {
	m := sysManager(t)
	if m.Version() != 1 {
		t.Skip("skipped: the machine's cgroups are v2")
	}
	testPlacement(t, m, func(r Ref) []string {
		return []string{"memory:" + r.Paths["memory"] + "\n", "pids:" + r.Paths["pids"] + "\n", "freezer:" + r.Paths["freezer"] + "\n"}
	})
}

func TestStartPlacesTheProgramV2(t *testing.T) {
	m := v2Manager(t)
	testPlacement(t, m, func(r Ref) []string { return []string{"0::" + r.Path + "\n"} })
}

// testKill checks that Kill ends a program and the grandchild it started
// in a session of its own, which a kill of its process group misses.
func testKill(t *testing.T, m *Manager) {
	c := create(t, m, "driver-1-1", Limits{})
	cmd, out := helper(t, "setsid")
	startIn(t, c, cmd)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(line))
	if pgid, _ := syscall.Getpgid(grandchild); pgid == cmd.Process.Pid {
		t.Fatalf("grandchild %d is in the program's process group", grandchild)
	}
	if pids, _ := c.Pids(); len(pids) != 2 {
		t.Fatalf("cgroup holds %v, want the program and its grandchild", pids)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !c.Wait(5 * time.Second) {
		pids, _ := c.Pids()
		t.Fatalf("cgroup still holds %v after Kill", pids)
	}
	// The grandchild was re-parented to init (or a subreaper), which
	// reaps it: it is gone from the process table.
	if err := waitGone(grandchild, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if c.Ref().exists() {
		t.Fatalf("cgroup %s still exists after Remove", c.Ref())
	}
}

func waitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, fs.ErrNotExist) || (err == nil && strings.Contains(string(b), ") Z ")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still alive after %s", pid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKillEndsSetsidGrandchildV1(t *testing.T) {
	m := sysManager(t)
	if m.Version() != 1 {
		t.Skip("skipped: the machine's cgroups are v2")
	}
	testKill(t, m)
}

func TestKillEndsSetsidGrandchildV2(t *testing.T) {
	testKill(t, v2Manager(t))
}

func TestLimitsAreWritten(t *testing.T) {
	m := sysManager(t)
	r, err := m.Create("app-1-0", Limits{MemoryMB: 64, Cores: 2, Pids: 100})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	if r.Version == 1 {
		files[filepath.Join(r.Root, "memory", r.Paths["memory"], "memory.limit_in_bytes")] = "67108864"
		files[filepath.Join(r.Root, "cpu", r.Paths["cpu"], "cpu.cfs_quota_us")] = "200000"
		files[filepath.Join(r.Root, "cpu", r.Paths["cpu"], "cpu.cfs_period_us")] = "100000"
		files[filepath.Join(r.Root, "pids", r.Paths["pids"], "pids.max")] = "100"
	} else {
		d := filepath.Join(r.Root, r.Path)
		files[filepath.Join(d, "memory.max")] = "67108864"
		files[filepath.Join(d, "memory.oom.group")] = "1"
		files[filepath.Join(d, "cpu.max")] = "200000 100000"
		files[filepath.Join(d, "pids.max")] = "100"
	}
	for f, want := range files {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %q", f, b, err, want)
		}
	}
	if _, err := m.Create("app-1-0", Limits{}); err == nil {
		t.Error("a second Create of the same unit succeeded")
	}
	for _, bad := range []string{"", "..", "a/b", "cgroup.procs"} {
		if _, err := m.Create(bad, Limits{}); err == nil {
			t.Errorf("Create(%q) succeeded", bad)
		}
	}
	if _, err := m.Create("app-1-1", Limits{MemoryMB: -1}); err == nil {
		t.Error("a negative limit was accepted")
	}
}

// TestOOMKillIsCounted: a program over its memory limit is killed by the
// kernel, and the cgroup's own accounting says so.
func TestOOMKillIsCounted(t *testing.T) {
	m := sysManager(t)
	c := create(t, m, "driver-1-1", Limits{MemoryMB: 32})
	cmd, _ := helper(t, "alloc", "HELPER_MB=256")
	startIn(t, c, cmd)
	err := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("program ended %v, want killed by SIGKILL", err)
	}
	u, err := c.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.OOMKills == 0 {
		t.Errorf("usage %+v counts no OOM kill", u)
	}
	if u.MemoryPeakBytes == 0 || u.MemoryPeakBytes > 33<<20 {
		t.Errorf("peak memory %d, want about the 32 MiB limit", u.MemoryPeakBytes)
	}
}

// weightyManager is sysManager with, on v1, the worker's cgroup at the
// top of the cpu hierarchy (beside drover/, not in it) and the greatest
// CPU weight, so that its units get both cores when they want them even
// on a loaded machine, and only a quota holds them back. On v2 the
// worker's cgroup is where the machine delegates one.
func weightyManager(t *testing.T) *Manager {
	t.Helper()
	m := sysManager(t)
	if m.Version() != 1 {
		return m
	}
	name := fmt.Sprintf("drover-test-%d-%s", os.Getpid(), t.Name())
	paths, err := v1Paths(m.ref.Root, name, true)
	if err != nil {
		t.Fatal(err)
	}
	top := &Manager{ref: Ref{Version: 1, Root: m.ref.Root, Paths: paths}}
	if err := v1Prepare(top.ref); err != nil {
		t.Fatal(err)
	}
	removeAtCleanup(t, top)
	if err := os.WriteFile(filepath.Join(top.ref.Root, "cpu", paths["cpu"], "cpu.shares"), []byte("262144"), 0o644); err != nil {
		t.Fatal(err)
	}
	return top
}

// TestCPUQuota: two busy threads with a quota of one core are throttled
// by the kernel (the cgroup's cpu.stat counts periods in which they ran
// out of quota) and use about one core, by the cgroup's own CPU
// accounting. Where the machine gives them less than a core even so, the
// quota cannot show, and the test says so and skips.
func TestCPUQuota(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("skipped: needs two CPUs to tell a quota of one core from the machine's size")
	}
	m := weightyManager(t)
	c := create(t, m, "driver-1-1", Limits{Cores: 1})
	r := c.Ref()
	stat := filepath.Join(r.Root, "cpu", r.Paths["cpu"], "cpu.stat")
	if r.Version == 2 {
		stat = filepath.Join(r.Root, r.Path, "cpu.stat")
	}
	cmd, _ := helper(t, "spin", "HELPER_THREADS=2", "GOMAXPROCS=2")
	startIn(t, c, cmd)
	before, err := c.Usage()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var throttled map[string]uint64
	for deadline := began.Add(20 * time.Second); ; {
		if throttled = cpuStat(t, stat); throttled["nr_throttled"] >= 3 {
			break
		}
		if time.Now().After(deadline) {
			after, err := c.Usage()
			if err != nil {
				t.Fatal(err)
			}
			cores := float64(after.CPUMicros-before.CPUMicros) / float64(time.Since(began).Microseconds())
			if cores < 0.9 {
				t.Skipf("skipped: the machine gave the busy threads %.2f cores, too few to reach a quota of one core (%v)", cores, throttled)
			}
			t.Fatalf("two busy threads used %.2f cores under a quota of one core and were never throttled: %s %v", cores, stat, throttled)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The program's own count is read first: it still spins, so a count
	// read after the cgroup's would hold time the cgroup's does not.
	own := cpuTime(t, cmd.Process.Pid)
	after, err := c.Usage()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(began)
	if throttled["throttled_time"] == 0 && throttled["throttled_usec"] == 0 {
		t.Errorf("cpu.stat %v counts throttled periods but no time throttled", throttled)
	}
	used := time.Duration(after.CPUMicros-before.CPUMicros) * time.Microsecond
	t.Logf("CPU %s in %s of wall time: %.2f cores; %v", used, wall, used.Seconds()/wall.Seconds(), throttled)
	// A period begun before the first reading may add up to one
	// period's quota.
	if used > wall*115/100+100*time.Millisecond {
		t.Errorf("used %s of CPU in %s with a quota of one core", used, wall)
	}
	// The cgroup's count covers what the kernel counts for the process.
	if after.CPUMicros < uint64(own.Microseconds())*9/10 {
		t.Errorf("the cgroup counts %dus, the program alone used %s", after.CPUMicros, own)
	}
}

// cpuStat reads a cgroup's cpu.stat, lines of a name and a count.
func cpuStat(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", path, l)
			}
			out[f[0]] = n
		}
	}
	return out
}

// cpuTime is the user and system time process pid used so far, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestSweepRemovesOthers: Sweep kills and removes the cgroups it is not
// told to keep, and leaves the kept ones and their programs alone.
func TestSweepRemovesOthers(t *testing.T) {
	m := sysManager(t)
	gone := create(t, m, "driver-1-1", Limits{})
	kept := create(t, m, "driver-2-1", Limits{})
	orphan, _ := helper(t, "cgroup")
	startIn(t, gone, orphan)
	live, _ := helper(t, "cgroup")
	startIn(t, kept, live)
	removed, err := m.Sweep(func(n string) bool { return n == "driver-2-1" }, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "driver-1-1" {
		t.Errorf("swept %v, want [driver-1-1]", removed)
	}
	_ = orphan.Wait()
	if gone.Ref().exists() {
		t.Error("swept cgroup still exists")
	}
	if pids, _ := kept.Pids(); len(pids) != 1 {
		t.Errorf("kept cgroup holds %v, want its program", pids)
	}
	names, _ := m.Units()
	if len(names) != 1 || names[0] != "driver-2-1" {
		t.Errorf("units %v, want [driver-2-1]", names)
	}
}

func TestRefCheck(t *testing.T) {
	good := Ref{Version: 2, Root: "/sys/fs/cgroup", Path: "/drover/w1-abcd/driver-1-1"}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Ref{
		"version":       {Version: 3, Root: "/sys/fs/cgroup", Path: "/x"},
		"relative root": {Version: 2, Root: "sys/fs/cgroup", Path: "/x"},
		"dot dot":       {Version: 2, Root: "/sys/fs/cgroup", Path: "/drover/../../etc"},
		"the root":      {Version: 2, Root: "/sys/fs/cgroup", Path: "/"},
		"v1 paths v2":   {Version: 2, Root: "/sys/fs/cgroup", Path: "/x", Paths: map[string]string{"memory": "/x"}},
		"v1 unknown":    {Version: 1, Root: "/sys/fs/cgroup", Paths: map[string]string{"devices": "/x"}},
		"v1 none":       {Version: 1, Root: "/sys/fs/cgroup"},
		"negative":      {Version: 2, Root: "/sys/fs/cgroup", Path: "/x", Limits: Limits{Cores: -1}},
	} {
		if err := r.Check(); err == nil {
			t.Errorf("%s: %+v passed Check", name, r)
		}
		if _, err := Open(r); err == nil {
			t.Errorf("%s: %+v opened", name, r)
		}
	}
	if _, err := Open(Ref{Version: 2, Root: "/sys/fs/cgroup", Path: "/drover/no-such-worker/x"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing cgroup: %v, want ErrNotExist", err)
	}
}

// TestNotRootExplains: a worker that is not root is told so in the
// reason.
func TestNotRootExplains(t *testing.T) {
	if os.Getenv("ISOLATION_TEST_AS_NOBODY") == "1" {
		_, err := New(Config{Name: "nobody-test"})
		if err == nil {
			t.Fatal("New succeeded without root")
		}
		fmt.Println("REASON:", err)
		return
	}
	needRoot(t)
	// The test binary's own directory is root's alone.
	dir, err := os.MkdirTemp("", "isolation-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "isolation.test")
	b, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestNotRootExplains$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ISOLATION_TEST_AS_NOBODY=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "REASON:") || !strings.Contains(string(out), "not root") {
		t.Errorf("reason does not say not root:\n%s", out)
	}
}

// TestKillRightAfterStartSparesTheStarter: a kill of a unit just started
// ends its program and never the process that started it, however soon
// it comes (on v1 a thread of the starter sat in the cgroup for the fork).
func TestKillRightAfterStartSparesTheStarter(t *testing.T) {
	m := sysManager(t)
	for i := range 20 {
		r, err := m.Create(fmt.Sprintf("driver-1-%d", i+1), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(r)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sleep", "1000")
		startIn(t, c, cmd)
		if err := Destroy(r, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatal("the program outlived the kill of its unit")
		}
	}
}

// TestMissingControllersExplain: a hierarchy without a controller the
// limits need is refused with a one-line reason naming it, and leaves no
// cgroup behind: a v1 root with only a memory hierarchy, and a v2
// hierarchy whose cgroup has no memory controller (that of a hybrid
// host, whose controllers are all v1's).
func TestMissingControllersExplain(t *testing.T) {
	needRoot(t)
	name := fmt.Sprintf("test-%d-nocontrollers", os.Getpid())
	t.Run("v1", func(t *testing.T) {
		memory := filepath.Join(DefaultRoot, "memory")
		if v, err := versionAt(DefaultRoot); err != nil || v != 1 {
			t.Skip("skipped: the machine's cgroups are not v1")
		}
		root := t.TempDir()
		if err := os.Symlink(memory, filepath.Join(root, "memory")); err != nil {
			t.Fatal(err)
		}
		_, err := New(Config{Name: name, Root: root})
		want := "no cpu controller: cgroup v1 without a cpu hierarchy at " + filepath.Join(root, "cpu")
		if err == nil || err.Error() != want {
			t.Fatalf("New on a root with only memory: %v, want %q", err, want)
		}
		dir, err := cgroup1.NestedPath(filepath.Join(parentDir, name))(cgroup1.Memory)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(memory, dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused New left the worker's memory cgroup (%v)", err)
		}
	})
	t.Run("v2", func(t *testing.T) {
		root := filepath.Join(DefaultRoot, "unified")
		if v, err := versionAt(root); err != nil || v != 2 {
			t.Skip("skipped: no hybrid host's cgroup v2 mount at " + root)
		}
		_, own, err := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		if have, err := readControllers(filepath.Join(root, own, "cgroup.controllers")); err != nil || slices.Contains(have, "memory") {
			t.Skipf("skipped: the worker's v2 cgroup has controllers %q (%v)", have, err)
		}
		_, err = New(Config{Name: name, Root: root})
		if err == nil || !strings.HasPrefix(err.Error(), "no memory controller in cgroup "+own) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("New on a v2 cgroup without controllers: %v, want one line saying no memory controller in %s", err, own)
		}
		dir := filepath.Join(root, own, parentDir, name)
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			os.Remove(dir)
			t.Fatalf("a refused New left the worker's cgroup %s (%v)", dir, err)
		}
	})
}
