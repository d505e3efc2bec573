package artifact

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Users the tests stage for besides nobody: IDs with no account, which
// the kernel checks like any other.
const (
	allowedUID = 4242
	// sharedGID is a group nobody is given in some tests only.
	sharedGID = 4243
)

// nobodyOwner is the unprivileged user the tests stage for. The test is
// skipped unless it runs as root, which taking another user's rights
// needs.
func nobodyOwner(t *testing.T) Owner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("opening a file with another user's rights needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return Owner{Name: u.Username, UID: uid, GID: gid, Groups: []int{gid}}
}

// reachableDir is a new directory every user may pass through (0711, as
// are the test's directories above it), as the directories above a
// worker's files are.
func reachableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeOwned writes script to path with mode, owned by uid and gid.
func writeOwned(t *testing.T, path string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(script), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// A staging for a program run as another user reads a file:// artifact
// with that user's rights: a file it may read stages, as its own; a file
// of mode 0600, a file in a directory of mode 0700, a link to a file it
// may not read and a file of a group it is not in are refused, naming
// the user, as is the runner's environ, and anything else in /proc
// (whose self is the runner) is refused too; a
// FIFO is refused as not a regular file rather than waited on. A refusal
// leaves nothing staged and nothing in the cache.
func TestFileURLIsReadWithTheProgramsRights(t *testing.T) {
	nobody := nobodyOwner(t)
	base := reachableDir(t)
	writeOwned(t, filepath.Join(base, "open.sh"), 0o644, 0, 0)
	writeOwned(t, filepath.Join(base, "secret"), 0o600, 0, 0)
	if err := os.Mkdir(filepath.Join(base, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeOwned(t, filepath.Join(base, "private", "open.sh"), 0o644, 0, 0)
	if err := os.Symlink(filepath.Join(base, "secret"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	writeOwned(t, filepath.Join(base, "shared.sh"), 0o640, 0, sharedGID)
	if err := unix.Mkfifo(filepath.Join(base, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}

	s := newStager(t, func(s *Stager) { s.Owner = &nobody })
	dir, _ := mustStage(t, s, normalized(t, "file://"+filepath.Join(base, "open.sh")))
	if got, want := listing(t, dir), []string{"open.sh -rwxr-xr-x", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, "open.sh")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(nobody.UID) {
		t.Fatalf("open.sh: %v, not the program's", err)
	}
	for _, p := range []string{"secret", "private/open.sh", "link", "shared.sh", "/proc/self/environ"} {
		url := "file://" + filepath.Join(base, p)
		if strings.HasPrefix(p, "/") {
			url = "file://" + p
		}
		assertFails(t, s, "fetch "+url+": user nobody may not read it: permission denied", normalized(t, url))
	}
	// Readable by all, and answering for the runner.
	assertFails(t, s, "fetch file:///proc/self/maps: "+errInProc.Error(), normalized(t, "file:///proc/self/maps"))
	fifo := "file://" + filepath.Join(base, "fifo")
	assertFails(t, s, "fetch "+fifo+": not a regular file", normalized(t, fifo))
	assertNoEntry(t, s.Cache)

	member := nobody
	member.Groups = append(slices.Clone(nobody.Groups), sharedGID)
	s = newStager(t, func(s *Stager) { s.Owner = &member })
	mustStage(t, s, normalized(t, "file://"+filepath.Join(base, "shared.sh")))
}

// A file:// artifact staged once for a user who may read it is not
// handed to another who may not by the cache, with or without a
// checksum: file:// artifacts are never cached.
func TestCachedFileURLIsNotHandedToAnotherUser(t *testing.T) {
	nobody := nobodyOwner(t)
	base := reachableDir(t)
	path := filepath.Join(base, "app.sh")
	writeOwned(t, path, 0o600, allowedUID, allowedUID)
	allowed := Owner{UID: allowedUID, GID: allowedUID}
	s := newStager(t, func(s *Stager) { s.Owner = &allowed })
	other := newStager(t, func(o *Stager) { o.Cache, o.Owner = s.Cache, &nobody })
	for _, url := range []string{"file://" + path + "?checksum=sha256:" + sum([]byte(script)), "file://" + path} {
		a := normalized(t, url)
		if dir, st := mustStage(t, s, a); st.Fetched != 0 || listing(t, dir)[0] != "app.sh -rwxr-xr-x" {
			t.Fatalf("staged %v, fetched %d", listing(t, dir), st.Fetched)
		}
		assertFails(t, other, "fetch file://"+path+": user nobody may not read it: permission denied", a)
	}
	assertNoEntry(t, s.Cache)
}

// A program run as the runner's own user (root, allowed with
// --allow-root) has its file:// artifacts read with the runner's rights,
// as a program run as the runner does: a 0600 file of another user
// stages.
func TestFileURLOfTheRunnersOwnUser(t *testing.T) {
	nobodyOwner(t)
	path := filepath.Join(reachableDir(t), "app.sh")
	writeOwned(t, path, 0o600, allowedUID, allowedUID)
	s := newStager(t, func(s *Stager) { s.Owner = &Owner{Name: "root"} })
	mustStage(t, s, normalized(t, "file://"+path))
}

// openAs changes the rights of its own thread alone: a thread of the
// caller keeps its groups, file-system IDs and capabilities, and the
// file opened is read afterwards by any thread.
func TestOpenAsChangesNoOtherThread(t *testing.T) {
	nobody := nobodyOwner(t)
	path := filepath.Join(reachableDir(t), "open.sh")
	writeOwned(t, path, 0o644, 0, 0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadRights()
	f, err := openAs(context.Background(), path, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if after := threadRights(); after != before {
		t.Fatalf("the caller's thread went from %s to %s", before, after)
	}
	b := make([]byte, len(script))
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != script {
		t.Fatalf("read %q, %v", b, err)
	}
}

// becomeUser leaves its thread the user's groups and file-system IDs and
// no effective capability (CAP_SYS_PTRACE would pass /proc's checks).
func TestBecomeUserLeavesNoPrivilege(t *testing.T) {
	nobody := nobodyOwner(t)
	nobody.Groups = []int{nobody.GID, sharedGID}
	got := make(chan string, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine.
		runtime.LockOSThread()
		if err := becomeUser(nobody); err != nil {
			got <- err.Error()
			return
		}
		got <- threadRights()
	}()
	groups := slices.Sorted(slices.Values(nobody.Groups))
	want := fmt.Sprintf("groups %v fsuid %d fsgid %d capabilities 0x0 0x0", groups, nobody.UID, nobody.GID)
	if r := <-got; r != want {
		t.Fatalf("the thread has %s, want %s", r, want)
	}
}

// threadRights describes the calling thread's groups, file-system IDs
// and effective capabilities, sorted so as to compare.
func threadRights() string {
	groups, err := unix.Getgroups()
	if err != nil {
		return "getgroups: " + err.Error()
	}
	// An invalid ID changes nothing and returns the one in force.
	fsuid, _ := unix.SetfsuidRetUid(-1)
	fsgid, _ := unix.SetfsgidRetGid(-1)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return "capget: " + err.Error()
	}
	slices.Sort(groups)
	return fmt.Sprintf("groups %v fsuid %d fsgid %d capabilities %#x %#x", groups, fsuid, fsgid, caps[0].Effective, caps[1].Effective)
}
