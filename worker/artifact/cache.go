package artifact

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-project/drover/model"
)

// The cache's folders, under its directory.
const (
	// entriesDir holds one file per SHA-256 of the bytes, named by it in
	// lowercase hex, read-only, written once verified.
	entriesDir = "sha256"
	// locksDir holds one lock file per key being fetched (see lockKey).
	locksDir = "locks"
	// tmpDir holds downloads in flight, named KEY.RANDOM.
	tmpDir = "tmp"
)

// staleLock is how long a lock file of a URL without a checksum is kept
// once unused: it tells the processes that waited for a download what it
// fetched, and no wait outlasts an artifact's deadline.
const staleLock = 24 * time.Hour

// Cache is a content-addressed store of fetched artifacts in one
// directory (a worker's WORK_DIR/cache), shared by every runner process
// of the worker. An entry is the bytes of one artifact as fetched (an
// archive before unpacking), named by their SHA-256, and appears only
// once written whole, synced and verified (temp file, fsync, rename), so
// nothing half-written is ever an entry; and each use verifies the bytes
// again, so an entry changed on disk since is fetched anew rather than
// staged. Staging copies entries out and never hands one to a program.
//
// Processes coordinate through flock(2) alone, so a runner killed at any
// point leaves nothing locked: a download holds the exclusive lock of its
// key, so that other processes wanting the same artifact wait for it and
// take its result rather than download again (a cross-process
// single-flight); and every process that staged an entry holds a shared
// lock on it for as long as it lives, which pins it: Trim evicts only
// entries it can lock exclusively.
//
// Use counts by the entry's modification time, set at each use, so the
// least recently used go first.
type Cache struct {
	dir string
	// trim serializes Trim within the worker, the only process that
	// trims.
	trim sync.Mutex
}

// OpenCache opens the cache in dir, creating its folders (0700) as
// needed.
func OpenCache(dir string) (*Cache, error) {
	for _, d := range []string{entriesDir, locksDir, tmpDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("artifact cache: %w", err)
		}
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) entryPath(sum string) string { return filepath.Join(c.dir, entriesDir, sum) }

// entry is an open, pinned cache entry.
type entry struct {
	f *os.File
	// path is where the entry is; f is open on it (or on what it was
	// when another process replaced it with the same bytes).
	path string
	sum  string
	size int64
	// fetched says this process downloaded it rather than found it;
	// replaced, that it found an entry of the same digest whose bytes no
	// longer matched it, and removed it first; local, that it is no
	// cache entry but a staging's own copy of a file:// artifact
	// (fetcher.copyLocal), removed with the staging's directory.
	fetched, replaced, local bool
}

// open returns the entry of sum pinned (its shared lock taken), its
// bytes verified against sum, and marked used; or false when the cache
// holds none. An entry whose bytes no longer have its digest (changed on
// disk by whoever could write the cache, or by the disk) is removed and
// reported as none, with corrupt set, so that it is fetched again rather
// than staged: the cache is trusted for speed, never for content.
func (c *Cache) open(sum string) (e *entry, ok, corrupt bool, err error) {
	path := c.entryPath(sum)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	if err := flockShared(f); err != nil {
		f.Close()
		return nil, false, false, err
	}
	// Trim may have evicted it between the open and the lock.
	fi, err := f.Stat()
	if err != nil || !sameFile(f, path) {
		f.Close()
		return nil, false, false, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		f.Close()
		return nil, false, false, err
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		f.Close()
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, false, true, err
		}
		return nil, false, true, nil
	}
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		f.Close()
		return nil, false, false, err
	}
	return &entry{f: f, path: path, sum: sum, size: fi.Size()}, true, false, nil
}

// fetchFunc writes an artifact's bytes to w from its start (it may be
// called on a file it already wrote to, truncated) and returns their
// SHA-256 in lowercase hex.
type fetchFunc func(ctx context.Context, w *os.File) (string, error)

// get returns artifact a's entry, pinned: found in the cache when a has a
// checksum, else fetched with fetch, single-flighted across processes by
// key (onWait is called when another process holds the key). A URL without a checksum cannot be looked up before its bytes are
// known, so it is fetched each time, except that a process which waited
// for another's download of the same URL takes that download's entry.
func (c *Cache) get(ctx context.Context, a model.Artifact, fetch fetchFunc, onWait func()) (*entry, error) {
	key := "sha256-" + a.SHA256
	replaced := false
	if a.SHA256 != "" {
		e, ok, corrupt, err := c.open(a.SHA256)
		if ok || err != nil {
			return e, err
		}
		replaced = corrupt
	} else {
		k := sha256.Sum256([]byte(a.URL))
		key = "url-" + hex.EncodeToString(k[:])
	}
	lock, err := lockKey(ctx, filepath.Join(c.dir, locksDir, key), onWait)
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	sum := a.SHA256
	if sum == "" && lock.waited {
		if now := lock.content(); now != lock.before {
			sum, _, _ = strings.Cut(now, " ")
		}
	}
	if model.IsSHA256(sum) {
		e, ok, corrupt, err := c.open(sum)
		if ok || err != nil {
			return e, err
		}
		replaced = replaced || corrupt
	}
	e, err := c.fetch(ctx, key, a.SHA256, fetch)
	if err != nil {
		return nil, err
	}
	e.replaced = replaced
	if a.SHA256 == "" {
		// A nonce: two downloads of the same bytes must still read as
		// two results to a process comparing what the file held.
		var nonce [8]byte
		_, _ = rand.Read(nonce[:])
		if err := lock.record(e.sum + " " + hex.EncodeToString(nonce[:])); err != nil {
			e.f.Close()
			return nil, err
		}
	}
	return e, nil
}

// fetch downloads key into a temp file and makes it the entry of its
// digest, which must be want when want is not empty. The entry is pinned
// before it is renamed into place, so Trim never sees it unpinned.
func (c *Cache) fetch(ctx context.Context, key, want string, fetch fetchFunc) (*entry, error) {
	f, err := os.CreateTemp(filepath.Join(c.dir, tmpDir), key+".*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	sum, err := fetch(ctx, f)
	if err != nil {
		return nil, err
	}
	if err := checkSum(want, sum); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Chmod(0o444); err != nil {
		return nil, err
	}
	if err := flockShared(f); err != nil {
		return nil, err
	}
	path := c.entryPath(sum)
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	committed = true
	if err := syncDir(filepath.Join(c.dir, entriesDir)); err != nil {
		f.Close()
		return nil, err
	}
	return &entry{f: f, path: path, sum: sum, size: fi.Size(), fetched: true}, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// TrimResult says what a Trim or a Free did. Sizes are bytes.
type TrimResult struct {
	// Removed entries freed Freed bytes; Kept bytes of entries remain;
	// Pinned bytes of them were passed over because live units use them.
	Removed int
	Freed   int64
	Kept    int64
	Pinned  int64
}

// Trim evicts the least recently used entries until the entries total at
// most limit bytes, passing over those a live process pins; the cache may
// therefore stay above limit. It also removes what crashed processes left
// behind: downloads in flight nobody holds and unused lock files. The
// worker trims to its --cache-size after each staging and periodically.
func (c *Cache) Trim(limit int64) (TrimResult, error) {
	return c.evictOldest(context.Background(), func(res TrimResult) bool { return res.Kept <= limit })
}

// Free evicts the least recently used entries no live process pins until
// they total n bytes or none is left to evict, and sweeps as Trim does:
// the worker's answer to a disk running low, which may take the cache
// below its bound. Freed may fall short of n (pinned entries stay) or pass
// it (entries go whole). It stops between entries when ctx ends, with
// ctx's error and what it freed until then.
func (c *Cache) Free(ctx context.Context, n int64) (TrimResult, error) {
	return c.evictOldest(ctx, func(res TrimResult) bool { return res.Freed >= n })
}

// evictOldest evicts unpinned entries, least recently used first, until
// enough says the result so far suffices, then sweeps.
func (c *Cache) evictOldest(ctx context.Context, enough func(TrimResult) bool) (TrimResult, error) {
	c.trim.Lock()
	defer c.trim.Unlock()
	var res TrimResult
	type stat struct {
		name string
		size int64
		used time.Time
	}
	des, err := os.ReadDir(filepath.Join(c.dir, entriesDir))
	if err != nil {
		return res, err
	}
	var entries []stat
	for _, de := range des {
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		entries = append(entries, stat{de.Name(), fi.Size(), fi.ModTime()})
		res.Kept += fi.Size()
	}
	slices.SortFunc(entries, func(a, b stat) int { return a.used.Compare(b.used) })
	for _, e := range entries {
		if enough(res) {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		removed, err := evict(filepath.Join(c.dir, entriesDir, e.name))
		if err != nil {
			return res, err
		}
		if !removed {
			res.Pinned += e.size
			continue
		}
		res.Removed++
		res.Freed += e.size
		res.Kept -= e.size
	}
	c.sweep()
	return res, nil
}

// evict removes the entry at path unless a process pins it.
func evict(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	ok, err := tryFlock(f, syscall.LOCK_EX)
	if err != nil || !ok || !sameFile(f, path) {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// sweep removes the temp files of downloads whose process died (no one
// holds their key's lock) and lock files nobody holds: those of checksums
// at once, since they hold nothing, those of URLs once stale (staleLock).
// Removing a lock file is safe while holding it: lockKey takes a lock
// again when its file was replaced.
func (c *Cache) sweep() {
	locks := filepath.Join(c.dir, locksDir)
	tmps, _ := os.ReadDir(filepath.Join(c.dir, tmpDir))
	for _, de := range tmps {
		key, _, ok := strings.Cut(de.Name(), ".")
		if !ok {
			continue
		}
		withFreeLock(filepath.Join(locks, key), func() {
			os.Remove(filepath.Join(c.dir, tmpDir, de.Name()))
		})
	}
	des, _ := os.ReadDir(locks)
	for _, de := range des {
		if fi, err := de.Info(); err != nil || (strings.HasPrefix(de.Name(), "url-") && time.Since(fi.ModTime()) < staleLock) {
			continue
		}
		path := filepath.Join(locks, de.Name())
		withFreeLock(path, func() { os.Remove(path) })
	}
}

// withFreeLock runs f while holding the lock file at path, when no other
// process holds it; it creates no lock file.
func withFreeLock(path string, f func()) {
	lf, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f()
		return
	}
	if err != nil {
		return
	}
	defer lf.Close()
	if ok, err := tryFlock(lf, syscall.LOCK_EX); ok && err == nil && sameFile(lf, path) {
		f()
	}
}
