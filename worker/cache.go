package worker

import (
	"context"
	"path/filepath"
	"time"

	"github.com/drover-project/drover/worker/unitdir"
)

// Artifacts opens the artifact cache the worker trims (package artifact,
// which package host adapts; cmd/drover passes host.Artifacts). Nil
// leaves the cache untrimmed: the runners still stage through CacheDir.
type Artifacts interface {
	// OpenCache opens the cache in dir, creating it as needed.
	OpenCache(dir string) (ArtifactCache, error)
}

// ArtifactCache is the artifact cache as the worker keeps it: to its
// bound (Config.CacheSizeMB), and smaller when the disk runs low. Both
// evict the least recently used entries that no live unit (a runner of
// this worker, adopted ones included) uses, and are safe for concurrent
// use.
type ArtifactCache interface {
	// Trim evicts entries until the cache holds at most maxBytes bytes
	// or only entries in use.
	Trim(maxBytes int64) (CacheTrim, error)
	// Free evicts entries until bytes are freed or only entries in use
	// are left; it stops between entries when ctx ends, with its error.
	Free(ctx context.Context, bytes int64) (CacheTrim, error)
}

// CacheTrim is what one trim of the artifact cache did (artifact's
// TrimResult): Removed entries freed Freed bytes; Kept bytes remain, of
// which Pinned were passed over because live units use them.
type CacheTrim struct {
	Removed             int
	Freed, Kept, Pinned int64
}

// CacheDir, in the work dir, is the artifact cache (artifact.Cache) the
// worker's runners stage through. It is named like no driver or app, so
// it is never taken for a unit's directory.
const CacheDir = "cache"

// cacheTrimInterval is how often the worker trims the cache besides after
// each staging that added an entry: the entries of live units may keep
// the cache above its bound, and once those units end (adopted ones and
// those of a worker since restarted included) the next trim brings it
// back under.
const cacheTrimInterval = time.Minute

// FreeCache asks the artifact cache (Config.Artifacts; none frees
// nothing) for space when the disk runs low (the
// work-dir cleanup calls it): it evicts the least recently used entries
// that no live unit (a runner of this worker, adopted ones included) uses
// until bytes are freed, and returns how many it freed, which may be
// fewer (what live units use stays) or more (entries go whole). It may
// take the cache below Config.CacheSizeMB; stagings fill it again. It
// stops between entries when ctx ends, with ctx's error. It is safe for
// concurrent use.
func (j *janitor) FreeCache(ctx context.Context, bytes int64) (freed int64, err error) {
	if j.cache == nil {
		return 0, nil
	}
	res, err := j.cache.Free(ctx, bytes)
	j.logTrim("freed", res, err)
	return res.Freed, err
}

// trimCache trims the cache to Config.CacheSizeMB, if the worker keeps
// one (Config.Artifacts).
func (j *janitor) trimCache() {
	if j.cache == nil {
		return
	}
	res, err := j.cache.Trim(j.cfg.CacheSizeMB << 20)
	j.logTrim("trimmed", res, err)
}

func (j *janitor) logTrim(what string, res CacheTrim, err error) {
	if err != nil {
		j.log.Warn("artifact cache not "+what, "err", err, "removed", res.Removed, "freed_bytes", res.Freed)
		return
	}
	if res.Removed > 0 {
		j.log.Info("artifact cache "+what, "removed", res.Removed, "freed_bytes", res.Freed, "kept_bytes", res.Kept, "pinned_bytes", res.Pinned)
	}
}

// trimCacheSoon asks the trimmer for a trim now (non-blocking).
func (j *janitor) trimCacheSoon() {
	select {
	case j.trimNow <- struct{}{}:
	default:
	}
}

// trimmer trims the cache to its bound at start, every cacheTrimInterval
// and when asked, until trimStop closes.
func (j *janitor) trimmer() {
	defer close(j.trimDone)
	t := time.NewTicker(cacheTrimInterval)
	defer t.Stop()
	for {
		j.trimCache()
		select {
		case <-j.trimStop:
			return
		case <-t.C:
		case <-j.trimNow:
		}
	}
}

// staging is what a unit's runner needs to stage its artifacts. Paths are
// absolute (New makes them so): the runner works in the unit's directory.
func (rc *reconciler) staging() *unitdir.Staging {
	return &unitdir.Staging{
		CacheDir: filepath.Join(rc.cfg.WorkDir, CacheDir),
		ArtifactLimits: unitdir.ArtifactLimits{
			MaxSize:      rc.cfg.ArtifactMaxSizeMB << 20,
			Timeout:      rc.cfg.ArtifactTimeout,
			StallTimeout: rc.cfg.ArtifactStallTimeout,
		},
		Masters: rc.cfg.Masters,
		BindIP:  rc.cfg.BindIP,
		TLSCA:   rc.cfg.TLS.CA,
		TLSCert: rc.cfg.TLS.Cert,
		TLSKey:  rc.cfg.TLS.Key,
	}
}
