// Package artifact fetches, verifies, caches, unpacks and stages the
// artifacts of a driver attempt or an executor into its directory before
// the program starts: what Spark's DriverRunner.downloadUserJar does for
// the user's jar and Nomad's artifact block does for any task.
//
// An artifact (model.Artifact, normalized by the master before it entered
// the Raft log) comes from an http, https or file URL, or from the
// masters' store of uploaded files (client.OpenBlob). Its bytes go to a
// content-addressed Cache shared by the worker's runners, then are copied
// (a single file) or unpacked (an archive, with go-getter's decompressors
// and checks of this package's own) into the unit's directory, all or
// nothing. Every failure is one line that names the artifact and the
// cause: "fetch https://host/app.jar: 404 Not Found".
//
// HTTP is fetched with net/http directly rather than go-getter's HTTP
// getter, which sends a HEAD first, follows X-Terraform-Get redirections
// to other getters, has no stall timeout, retry or size cap, and caches
// nothing. See DESIGN.md for the rules.
package artifact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

// Defaults of Stager.RetryBase and fetches (those of Limits are
// unitdir's).
const (
	// DefaultRetryBase is the first pause before a failed download is
	// tried again; it doubles up to 30 s.
	DefaultRetryBase = time.Second
	// fetchParallel bounds the artifacts of one unit fetched at once.
	fetchParallel = 4
)

// Limits bound the fetching and unpacking of each artifact: the
// spec's unitdir.ArtifactLimits, which the worker writes for its runners.
type Limits = unitdir.ArtifactLimits

// Stager stages artifacts through one Cache. Its fields are read only; a
// Stager is safe for concurrent use.
type Stager struct {
	// Cache holds the fetched bytes; required.
	Cache *Cache
	// Limits bound each artifact.
	Limits Limits
	// HTTP fetches http and https URLs; nil means NewHTTPClient("").
	HTTP *http.Client
	// Blobs reads uploads; nil refuses them.
	Blobs BlobSource
	// Scratch is the directory each staging assembles its tree in
	// before moving it into the unit's directory: on the same file
	// system, and writable by this process alone. A staging that runs
	// with more privilege than the program (as root, for a program run
	// as another user) must not build in a directory the program's user
	// can write, where a link or a renamed directory planted meanwhile
	// would take its writes elsewhere. Empty means the unit's directory
	// itself.
	Scratch string
	// Owner, when set, is the program's user: every file and directory
	// staged is given to it before they are moved into the unit's
	// directory, and, when it is another user than this process's, a
	// file:// artifact is opened with its rights, so that a staging run
	// as root reads no file the program could not (see openAs). Nil
	// leaves the files this process's and opens file:// artifacts with
	// its own rights, which are then the program's.
	Owner *Owner
	// RetryBase is the first pause before a download is tried again
	// (default DefaultRetryBase).
	RetryBase time.Duration
	// Log receives a line per fetch and retry; nil discards them.
	Log *slog.Logger
	// OnRetry, when set, is told of each failed try of a download that
	// will be tried again, before the pause: the runner makes it the
	// attempt's staging progress. It is called from the fetches'
	// goroutines, up to fetchParallel at once, and must not block.
	OnRetry func(Retry)

	defaultHTTP sync.Once
	http        *http.Client
}

func (s *Stager) httpClient() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	s.defaultHTTP.Do(func() { s.http = NewHTTPClient("") })
	return s.http
}

func (s *Stager) retryBase() time.Duration {
	if s.RetryBase > 0 {
		return s.RetryBase
	}
	return DefaultRetryBase
}

func (s *Stager) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Retry is a failed try of an artifact's download that is tried again
// (Stager.OnRetry).
type Retry struct {
	// Artifact names it as failures do: its URL, or upload:HEX (NAME).
	Artifact string
	// Try counts the tries of this fetch, from 1.
	Try int
	// Err is the try's cause: a connection's error, an HTTP status, a
	// stall.
	Err error
	// Pause is the wait before the next try: RetryBase, doubling up to
	// 30 s.
	Pause time.Duration
}

// String says the retry in one line: "fetching URL: 503 Service
// Unavailable, try 3, next in 4s".
func (r Retry) String() string {
	return fmt.Sprintf("fetching %s: %v, try %d, next in %s", r.Artifact, r.Err, r.Try, r.Pause)
}

// Owner is a program's user: its numeric user and primary group, as
// chown(2) takes them, and its supplementary groups, which decide with
// them what it may read.
type Owner struct {
	// Name names the user in refusals ("user nobody may not read it");
	// empty names it by its uid.
	Name     string
	UID, GID int
	// Groups are the supplementary group IDs; empty is none.
	Groups []int
}

// name is o's name, or its uid when it has none.
func (o Owner) name() string {
	if o.Name != "" {
		return o.Name
	}
	return "uid " + strconv.Itoa(o.UID)
}

// Staged is the outcome of a staging: it pins the cache entries the unit
// used until Release (or the process's exit), so the worker does not
// evict what a live unit uses.
type Staged struct {
	pins []*os.File
	// Fetched counts the artifacts downloaded into the cache rather than
	// found there; file:// artifacts, copied and never cached, are not
	// counted.
	Fetched int
}

// Release unpins the entries. It is safe on nil.
func (st *Staged) Release() {
	if st == nil {
		return
	}
	for _, f := range st.pins {
		f.Close()
	}
	st.pins = nil
}

// Stage makes as present in dir, the unit's directory: it finds each
// artifact in the cache (its bytes verified again) or fetches it (at most
// fetchParallel at once, each within Limits.Timeout), or copies a file://
// artifact with Owner's rights into a temporary directory in Scratch,
// then copies or unpacks them all into that directory, gives them to
// Owner, and moves what they make into dir, each under its Dest. It
// either stages every artifact or leaves dir as it was, and returns the
// first failure as one line naming the artifact: "fetch URL: CAUSE"
// (ErrTooLarge, ErrTimedOut, ErrChecksum, an HTTP status, "user nobody
// may not read it: permission denied", ...) or "stage URL: CAUSE" (an
// archive entry that leaves the directory, a name two artifacts use or
// dir holds already, ...). Cancelling ctx (a stop) ends it at once with
// ctx's cause.
func (s *Stager) Stage(ctx context.Context, dir string, as []model.Artifact) (*Staged, error) {
	lim := s.Limits.WithDefaults()
	scratch := s.Scratch
	if scratch == "" {
		scratch = dir
	}
	tmp, err := makeScratch(scratch)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	defer os.RemoveAll(tmp)
	entries := make([]*entry, len(as))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallel)
	for i, a := range as {
		g.Go(func() error {
			e, err := s.get(gctx, a, lim, filepath.Join(tmp, localPrefix+strconv.Itoa(i)))
			if err != nil {
				return fmt.Errorf("fetch %s: %w", label(a), err)
			}
			entries[i] = e
			return nil
		})
	}
	if err = g.Wait(); err == nil {
		err = place(dir, tmp, as, entries, lim, s.Owner)
	}
	st := &Staged{}
	for _, e := range entries {
		switch {
		case e == nil:
		case e.local:
			// A copy of its own, removed with tmp: nothing to pin.
			e.f.Close()
		default:
			st.pins = append(st.pins, e.f)
			if e.fetched {
				st.Fetched++
			}
		}
	}
	if err != nil {
		st.Release()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	return st, nil
}

// get returns a's entry within a's deadline: a file:// artifact copied
// to local, any other from the cache, pinned.
func (s *Stager) get(ctx context.Context, a model.Artifact, lim Limits, local string) (*entry, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errDeadline)
	defer cancel()
	start := time.Now()
	f := &fetcher{s: s, a: a, lim: lim}
	if path, ok := localPath(a); ok {
		e, err := f.copyLocal(ctx, path, local)
		if err != nil {
			return nil, err
		}
		s.log().Info("artifact copied", "artifact", a.String(), "sha256", e.sum, "bytes", e.size, "took", time.Since(start))
		return e, nil
	}
	e, err := s.Cache.get(ctx, a, f.fetch, func() {
		s.log().Info("waiting for another process's download of the artifact", "artifact", a.String())
	})
	if errors.Is(err, errDeadline) {
		// The deadline came while another process downloaded it.
		err = fmt.Errorf("%w after %s waiting for another download of it", ErrTimedOut, lim.Timeout)
	}
	if err != nil {
		return nil, err
	}
	if e.replaced {
		s.log().Warn("the cache's entry of the artifact no longer matched its digest; removed and fetched again", "artifact", a.String(), "sha256", e.sum)
	}
	if e.fetched {
		s.log().Info("artifact fetched", "artifact", a.String(), "sha256", e.sum, "bytes", e.size, "took", time.Since(start))
	} else {
		s.log().Info("artifact found in the cache", "artifact", a.String(), "sha256", e.sum)
	}
	return e, nil
}

// label names an artifact in a failure: its URL, without the options of
// Source, or upload:HEX (NAME).
func label(a model.Artifact) string {
	if a.URL != "" {
		return a.URL
	}
	return a.String()
}
