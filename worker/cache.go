package worker

import (
	"context"
	"time"

	"github.com/drover-project/drover/worker/artifact"
	"github.com/drover-project/drover/worker/runner"
)

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

// FreeCache asks the artifact cache for space when the disk runs low (the
// work-dir cleanup calls it): it evicts the least recently used entries
// that no live unit (a runner of this worker, adopted ones included) uses
// until bytes are freed, and returns how many it freed, which may be
// fewer (what live units use stays) or more (entries go whole). It may
// take the cache below Config.CacheSizeMB; stagings fill it again. It
// stops between entries when ctx ends, with ctx's error. It is safe for
// concurrent use.
func (w *Worker) FreeCache(ctx context.Context, bytes int64) (freed int64, err error) {
	res, err := w.cache.Free(ctx, bytes)
	w.logTrim("freed", res, err)
	return res.Freed, err
}

// trimCache trims the cache to Config.CacheSizeMB.
func (w *Worker) trimCache() {
	res, err := w.cache.Trim(w.cfg.CacheSizeMB << 20)
	w.logTrim("trimmed", res, err)
}

func (w *Worker) logTrim(what string, res artifact.TrimResult, err error) {
	if err != nil {
		w.log.Warn("artifact cache not "+what, "err", err, "removed", res.Removed, "freed_bytes", res.Freed)
		return
	}
	if res.Removed > 0 {
		w.log.Info("artifact cache "+what, "removed", res.Removed, "freed_bytes", res.Freed, "kept_bytes", res.Kept, "pinned_bytes", res.Pinned)
	}
}

// trimCacheSoon asks the trimmer for a trim now (non-blocking).
func (w *Worker) trimCacheSoon() {
	select {
	case w.trimNow <- struct{}{}:
	default:
	}
}

// trimmer trims the cache to its bound at start, every cacheTrimInterval
// and when asked, until trimStop closes.
func (w *Worker) trimmer() {
	defer close(w.trimDone)
	t := time.NewTicker(cacheTrimInterval)
	defer t.Stop()
	for {
		w.trimCache()
		select {
		case <-w.trimStop:
			return
		case <-t.C:
		case <-w.trimNow:
		}
	}
}

func (w *Worker) stopTrimmer() {
	close(w.trimStop)
	<-w.trimDone
}

// staging is what a unit's runner needs to stage its artifacts. Paths are
// absolute (New makes them so): the runner works in the unit's directory.
func (w *Worker) staging() *runner.Staging {
	return &runner.Staging{
		CacheDir: w.cache.Dir(),
		Limits: artifact.Limits{
			MaxSize:      w.cfg.ArtifactMaxSizeMB << 20,
			Timeout:      w.cfg.ArtifactTimeout,
			StallTimeout: w.cfg.ArtifactStallTimeout,
		},
		Masters: w.cfg.Masters,
		BindIP:  w.cfg.BindIP,
		TLSCA:   w.cfg.TLS.CA,
		TLSCert: w.cfg.TLS.Cert,
		TLSKey:  w.cfg.TLS.Key,
	}
}
