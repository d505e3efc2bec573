package artifact

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockPoll is how often a process waiting for another's download of the
// same artifact tries its lock again. flock(2) has no timeout and cannot
// be interrupted by a context, so the waiter polls a non-blocking lock
// instead of parking a thread it could not take back.
const lockPoll = 20 * time.Millisecond

// tryFlock takes lock how (syscall.LOCK_SH or LOCK_EX) on f without
// waiting; false means another open file description holds a conflicting
// one.
func tryFlock(f *os.File, how int) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}

// flockShared takes a shared lock on f, waiting for an exclusive one to
// go. The only exclusive holder of an entry's lock is Trim, which never
// waits while it holds one, so the wait is short.
func flockShared(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// sameFile says whether f is still the file at path: a lock taken on a
// file that was unlinked or replaced meanwhile guards nothing.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// keyLock is an exclusive lock on one key's lock file, held while one
// process downloads that key.
type keyLock struct {
	f *os.File
	// waited says another process held the lock when this one asked;
	// before is what the lock file held then.
	waited bool
	before string
}

// lockKey takes the exclusive lock of path, waiting (polling) while
// another process holds it, until ctx ends; onWait is called once when it
// has to wait. The lock file may be removed
// by Trim while nobody holds it, so a lock taken on a file no longer at
// path is dropped and taken again on the new one.
func lockKey(ctx context.Context, path string, onWait func()) (*keyLock, error) {
	l := &keyLock{}
	first := true
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		for {
			ok, err := tryFlock(f, syscall.LOCK_EX)
			if err != nil {
				f.Close()
				return nil, err
			}
			if ok {
				break
			}
			if first {
				l.waited, l.before = true, readAll(f)
				onWait()
			}
			first = false
			select {
			case <-ctx.Done():
				f.Close()
				return nil, context.Cause(ctx)
			case <-time.After(lockPoll):
			}
		}
		first = false
		if sameFile(f, path) {
			l.f = f
			return l, nil
		}
		f.Close()
	}
}

// content is what the lock file holds now.
func (l *keyLock) content() string { return readAll(l.f) }

// record replaces what the lock file holds; it is read only by processes
// that waited for this lock, to learn what the holder fetched.
func (l *keyLock) record(s string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(s), 0)
	return err
}

// unlock releases the lock (closing the file releases the flock).
func (l *keyLock) unlock() { l.f.Close() }

func readAll(f *os.File) string {
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	return string(b[:n])
}
