package artifact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// errInProc refuses a file:// artifact in /proc for a program run as
// another user: there /proc/self, and the runner's own /proc/PID, answer
// for the runner's process (the kernel skips its ptrace checks within one
// process), so what the runner could open is not what the program could.
var errInProc = errors.New("a file in /proc is not staged for a program run as another user: the runner's process there is not the program's")

// openAs opens path for reading as o would: from a thread of its own that
// takes o's file-system rights and no privilege, so that the kernel checks
// every component of the path, links, ACLs and /proc's ptrace checks
// (which use the file-system IDs) as it would for o's program. The file is
// opened O_NONBLOCK, so that a FIFO answers at once rather than waiting
// for a writer (it is then refused as not a regular file), and following
// no magic link (/proc/self/fd/N, /proc/PID/cwd, ...): those would lead
// to the runner's open files and directories, which the program could not
// reach. Where openat2 is missing (Linux before 5.6, or refused by an
// older seccomp filter) they are followed: the file they lead to is still
// opened with o's rights, so only the directories above it escape the
// check. A file in /proc is refused (errInProc). Cancelling ctx returns
// its cause at once; the open, when it ends, is closed.
//
// The thread: setgroups, setfsgid and setfsuid change the calling thread
// alone when issued as raw system calls, as golang.org/x/sys/unix issues
// them (syscall.Setgroups, by contrast, applies to every thread of the
// process since Go 1.16); a fsuid other than 0 clears the thread's
// file-system capabilities, and capset clears the rest (CAP_SYS_PTRACE
// would pass /proc's ptrace checks), on that thread alone. The goroutine
// locks the thread and never unlocks it, so the runtime ends the thread
// with the goroutine (runtime.LockOSThread) and no other goroutine ever
// runs with o's rights; the runtime also starts no thread from a locked
// one. What this thread opened, the runner then reads as itself.
func openAs(ctx context.Context, path string, o Owner) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := becomeUser(o); err != nil {
			done <- result{err: fmt.Errorf("cannot take user %s's file-system rights: %w", o.name(), err)}
			return
		}
		f, err := openUnprivileged(path)
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.f, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.f != nil {
				r.f.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// becomeUser gives the calling thread, locked for good, o's supplementary
// groups, file-system group and user IDs, and no effective capability,
// checking each: setfsuid and setfsgid report no failure but return the
// previous ID, so a second call returns the one in force.
func becomeUser(o Owner) error {
	if err := unix.Setgroups(o.Groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if got, err := unix.Getgroups(); err != nil || !sameGroups(got, o.Groups) {
		return fmt.Errorf("setgroups: the thread has groups %v (%v), want %v", got, err, o.Groups)
	}
	unix.SetfsgidRetGid(o.GID)
	if now, _ := unix.SetfsgidRetGid(o.GID); now != o.GID {
		return fmt.Errorf("setfsgid %d: the thread's file-system group is %d", o.GID, now)
	}
	unix.SetfsuidRetUid(o.UID)
	if now, _ := unix.SetfsuidRetUid(o.UID); now != o.UID {
		return fmt.Errorf("setfsuid %d: the thread's file-system user is %d", o.UID, now)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	caps[0].Effective, caps[1].Effective = 0, 0
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Capget(&hdr, &caps[0]); err != nil || caps[0].Effective != 0 || caps[1].Effective != 0 {
		return fmt.Errorf("capset: the thread keeps capabilities %#x %#x (%v)", caps[0].Effective, caps[1].Effective, err)
	}
	return nil
}

// sameGroups says whether the thread's groups are want, in any order.
func sameGroups(got, want []int) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(g int) bool { return !slices.Contains(got, g) })
}

// openUnprivileged opens path read-only, without following magic links
// where the kernel can refuse them, and refuses a file in /proc.
func openUnprivileged(path string) (*os.File, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_NO_MAGICLINKS})
	})
	// ENOSYS: a kernel before 5.6; EPERM: a seccomp filter older than
	// openat2 (a container runtime's). The plain open is checked with the
	// same rights.
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		fd, err = retryEINTR(func() (int, error) { return unix.Open(path, flags, 0) })
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	if fs.Type == unix.PROC_SUPER_MAGIC {
		unix.Close(fd)
		return nil, errInProc
	}
	return os.NewFile(uintptr(fd), path), nil
}

// retryEINTR calls open until a signal no longer interrupts it, as os.Open
// does.
func retryEINTR(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
