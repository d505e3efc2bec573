package worker

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/drover-project/drover/worker/unitdir"
)

// janitor is the part of the worker that keeps its disk: it removes the
// directories of finished units after CleanupTTL or when the disk runs
// low (cleaner), and keeps the artifact cache to CacheSizeMB (trimmer).
// It owns cleanMu and the cache; whether a unit is in use it reads from
// the workerState, under its lock.
type janitor struct {
	cfg     Config
	log     *slog.Logger
	db      *store
	metrics *workerMetrics
	st      *workerState
	// cleanMu makes cleanup passes (see clean) one at a time, and
	// guards shortWarned: the pass has warned that it cannot free
	// enough space, and does not again until the disk recovers.
	cleanMu     sync.Mutex
	shortWarned bool
	// cache is the artifact cache the runners stage through; the
	// trimmer keeps it to CacheSizeMB (trimNow: a non-blocking ask,
	// buffer 1). Nil without Config.Artifacts.
	cache     ArtifactCache
	trimNow   chan struct{}
	trimStop  chan struct{}
	trimDone  chan struct{}
	cancel    context.CancelFunc
	cleanDone chan struct{}
}

func newJanitor(cfg Config, log *slog.Logger, db *store, st *workerState, cache ArtifactCache) *janitor {
	return &janitor{cfg: cfg, log: log, db: db, st: st, cache: cache, trimNow: make(chan struct{}, 1),
		trimStop: make(chan struct{}), trimDone: make(chan struct{}), cleanDone: make(chan struct{})}
}

// start runs the cleanup and the cache trims until stop.
func (j *janitor) start() {
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	go j.cleaner(ctx)
	go j.trimmer()
}

// stop ends a cleanup pass between two directories, and the trims, and
// returns once both have.
func (j *janitor) stop() {
	j.cancel()
	<-j.cleanDone
	close(j.trimStop)
	<-j.trimDone
}

// The work-dir cleanup is Spark's spark.worker.cleanup.*, on by default:
// the directory of a finished attempt or executor is removed once it ended
// more than Config.CleanupTTL ago, and at once, oldest first, while the
// free space of the work dir's file system is below Config.MinFreeDisk.
// A driver's or app's directory goes with its last unit's.
//
// A unit is finished for the cleanup once the leader has acknowledged its
// final report: its record is gone from worker.db, and nothing of it is in
// Worker.units or Worker.unacked. A live unit, one a restarted worker
// would adopt, and one whose end the leader has not committed all have a
// record or a place in those, so none is ever removed. Nothing outside
// the unit directories is touched: not the record, the lease or the
// artifact cache (CacheDir), which the cleanup asks for room through
// CacheSpace instead.
//
// A directory is first moved into trashDir, under the workerState's mu and after its
// tombstone is written, then deleted outside the lock: a start or a log
// request sees it whole or not at all, and a crash mid-delete leaves only
// trash, which the next pass empties.

// cleanupInterval is how often the cleanup looks at the work dir: one
// statfs for the free space and, for the ages, a listing per driver or
// app and two stats per unit, some milliseconds for the thousands of
// units a week of work leaves.
const cleanupInterval = 10 * time.Second

// trashDir, in the work dir, holds the unit directories being deleted.
// Its name is no driver's or app's, so it is never taken for one.
const trashDir = ".trash"

// cleanupReason says why the cleanup removed a directory; it is the
// reason label of the cleanup's metrics.
type cleanupReason string

const (
	// reasonTTL: the unit ended more than Config.CleanupTTL ago.
	reasonTTL cleanupReason = "ttl"
	// reasonLowDisk: the work dir's file system had less than
	// Config.MinFreeDisk free.
	reasonLowDisk cleanupReason = "low_disk"
)

// CacheSpace is what the work-dir cleanup needs of the worker's artifact
// cache (WORK_DIR/cache): room, when the disk runs low. The cleanup asks
// it before it removes any unit's directory, since an evicted artifact can
// be fetched again and a finished unit's logs cannot.
type CacheSpace interface {
	// FreeCache evicts entries no live unit uses, least recently used
	// first, until it has freed at least bytes or has nothing more it
	// may evict, and returns the bytes it freed.
	FreeCache(ctx context.Context, bytes int64) (freed int64, err error)
}

// DiskFree returns the bytes of the file system holding path that an
// unprivileged process may still write (statfs's f_bavail times its
// block size): Config.FreeSpace's default.
func DiskFree(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// unitDir is a unit's directory as the cleanup finds it: a candidate,
// removed unless the unit is in use (inUseLocked).
type unitDir struct {
	key unitKey
	// ended is when the runner last wrote StatusFile (its final state),
	// or the directory's modification time without one.
	ended time.Time
}

// cleaner runs a cleanup pass at once and every cleanupInterval until ctx
// ends.
func (j *janitor) cleaner(ctx context.Context) {
	defer close(j.cleanDone)
	t := time.NewTicker(cleanupInterval)
	defer t.Stop()
	for {
		j.clean(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clean is one cleanup pass: it empties the trash, drops old tombstones,
// removes what outlived the TTL and, while the disk is low, asks the cache
// for room and removes the oldest finished units. Passes never overlap.
func (j *janitor) clean(ctx context.Context) {
	j.cleanMu.Lock()
	defer j.cleanMu.Unlock()
	if j.cfg.CleanupTTL <= 0 && j.cfg.MinFreeDisk <= 0 {
		return
	}
	j.emptyTrash()
	if err := j.db.prune(time.Now().Add(-tombstoneTTL)); err != nil {
		j.log.Warn("cannot drop old tombstones", "err", err)
	}
	low := false
	if j.cfg.MinFreeDisk > 0 {
		free, err := j.freeSpace()
		if err != nil {
			j.log.Warn("cleanup cannot read the work dir's free space", "err", err)
		}
		low = err == nil && free < j.cfg.MinFreeDisk
		if !low {
			j.shortWarned = false
		}
	}
	if j.cfg.CleanupTTL <= 0 && !low {
		return
	}
	units, err := j.unitDirs()
	if err != nil {
		j.log.Warn("cleanup cannot list the work dir", "err", err)
		return
	}
	if j.cfg.CleanupTTL > 0 {
		cutoff := time.Now().Add(-j.cfg.CleanupTTL)
		var kept []unitDir
		for _, u := range units {
			if ctx.Err() != nil || !u.ended.Before(cutoff) || !j.remove(u, reasonTTL) {
				kept = append(kept, u)
			}
		}
		units = kept
	}
	if low && ctx.Err() == nil {
		j.makeRoom(ctx, units)
	}
}

// makeRoom brings the work dir's free space back to MinFreeDisk: the cache
// first, then units, oldest first, measuring again after each. It warns
// once per shortage it cannot end.
func (j *janitor) makeRoom(ctx context.Context, units []unitDir) {
	free, err := j.freeSpace()
	if err != nil || free >= j.cfg.MinFreeDisk {
		return
	}
	if j.cfg.Cache != nil {
		freed, err := j.cfg.Cache.FreeCache(ctx, j.cfg.MinFreeDisk-free)
		if err != nil {
			j.log.Warn("cleanup could not free the artifact cache", "err", err)
		}
		if freed > 0 {
			j.metrics.cacheFreed.Add(float64(freed))
			j.log.Info("artifact cache freed for a low disk", "freed_bytes", freed)
			if free, err = j.freeSpace(); err != nil {
				j.log.Warn("cleanup cannot read the work dir's free space", "err", err)
				return
			}
		}
	}
	for _, u := range units {
		if free >= j.cfg.MinFreeDisk || ctx.Err() != nil {
			break
		}
		if !j.remove(u, reasonLowDisk) {
			continue
		}
		if free, err = j.freeSpace(); err != nil {
			j.log.Warn("cleanup cannot read the work dir's free space", "err", err)
			return
		}
	}
	if free < j.cfg.MinFreeDisk && !j.shortWarned && ctx.Err() == nil {
		j.shortWarned = true
		j.log.Warn("the work dir's disk is low and nothing more may be removed: live units and the artifacts they use hold the rest",
			"free_bytes", free, "min_free_disk", j.cfg.MinFreeDisk)
	}
}

// freeSpace measures the work dir's free space.
func (j *janitor) freeSpace() (int64, error) { return j.cfg.FreeSpace(j.cfg.WorkDir) }

// unitDirs lists the unit directories of the work dir, oldest
// first: the candidates, of which remove keeps those in use.
func (j *janitor) unitDirs() ([]unitDir, error) {
	entries, err := os.ReadDir(j.cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	var out []unitDir
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		names, err := dirNames(filepath.Join(j.cfg.WorkDir, e.Name()))
		if err != nil {
			continue
		}
		for _, k := range unitsIn(e.Name(), names) {
			if ended, ok := endedAt(k.dir(j.cfg.WorkDir)); ok {
				out = append(out, unitDir{key: k, ended: ended})
			}
		}
	}
	slices.SortFunc(out, func(a, b unitDir) int { return a.ended.Compare(b.ended) })
	return out, nil
}

// endedAt is when the unit in dir ended, as unitDir.ended says;
// false when dir is not a directory (a link a program planted, say).
func endedAt(dir string) (time.Time, bool) {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return time.Time{}, false
	}
	if s, err := os.Lstat(filepath.Join(dir, unitdir.StatusFile)); err == nil {
		return s.ModTime(), true
	}
	return st.ModTime(), true
}

// remove removes u's directory for reason, and its parent once empty,
// unless u is in use (inUseLocked). It reports whether it removed it.
func (j *janitor) remove(u unitDir, reason cleanupReason) bool {
	k := u.key
	dir := k.dir(j.cfg.WorkDir)
	trash := filepath.Join(j.cfg.WorkDir, trashDir, fmt.Sprintf("%s-%d", k.id, k.n))
	j.st.mu.Lock()
	if j.inUseLocked(k) {
		j.st.mu.Unlock()
		return false
	}
	// The tombstone first: a directory that outlives a failed rename
	// still keeps a stale assignment from running; the reverse order
	// would leave neither.
	err := j.db.bury(k, tombstone{At: time.Now().Unix(), Reason: reason})
	if err == nil {
		err = os.MkdirAll(filepath.Dir(trash), 0o700)
	}
	if err == nil {
		err = os.Rename(dir, trash)
	}
	if err == nil {
		// Fails while other units' directories are in it.
		_ = os.Remove(filepath.Dir(dir))
	}
	j.st.mu.Unlock()
	if err != nil {
		j.log.Warn("cleanup cannot remove a directory", k.attrs("dir", dir, "err", err)...)
		return false
	}
	size := diskUsage(trash)
	if err := os.RemoveAll(trash); err != nil {
		j.log.Warn("cleanup cannot delete a removed directory; the next pass tries again", k.attrs("dir", trash, "err", err)...)
	}
	j.metrics.cleanupRemoved.WithLabelValues(kindLabel[k.kind], string(reason)).Inc()
	j.metrics.cleanupBytes.WithLabelValues(string(reason)).Add(float64(size))
	j.log.Info("removed the directory of a finished "+k.kind.info().noun, k.attrs("reason", reason, "bytes", size, "ended", u.ended)...)
	return true
}

// inUseLocked says, with the workerState's mu held, whether the cleanup must keep k: it
// has a record (it is live, or adoptable, or its final report is not yet
// acknowledged), the worker runs or follows it, or a report of it awaits
// the leader. Under that lock no unit starts meanwhile: start records a unit
// with the lock held.
func (j *janitor) inUseLocked(k unitKey) bool {
	if _, ok := j.st.units[k]; ok || j.db.has(k) {
		return true
	}
	return slices.ContainsFunc(j.st.unacked, func(r report) bool { return r.key == k })
}

// emptyTrash deletes what earlier passes moved to the trash and could not
// delete, or a crash left there.
func (j *janitor) emptyTrash() {
	dir := filepath.Join(j.cfg.WorkDir, trashDir)
	names, err := dirNames(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			j.log.Warn("cleanup cannot empty its trash", "dir", dir, "err", err)
		}
	}
}

// removedReason words a tombstone's reason for the log endpoint.
func (j *janitor) removedReason(t tombstone) string {
	when := time.Unix(t.At, 0).UTC().Format(time.RFC3339)
	if t.Reason == reasonTTL {
		return fmt.Sprintf("removed by the work-dir cleanup at %s, more than --cleanup-ttl %s after it ended", when, j.cfg.CleanupTTL)
	}
	return fmt.Sprintf("removed by the work-dir cleanup at %s, when the disk's free space was below --min-free-disk (%d bytes)", when, j.cfg.MinFreeDisk)
}

// diskUsage is the disk space of the files under path, in bytes: their
// allocated blocks, what removing them frees.
func diskUsage(path string) int64 {
	var total int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			} else {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// dirNames lists the names in dir.
func dirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
