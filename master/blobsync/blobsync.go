// Package blobsync keeps the masters' copies of uploaded files right. A new
// upload is pushed from the master that received it to every other voter
// at once (Push), and the upload is acknowledged once a majority of the
// voters hold it, so that losing any one master loses no acknowledged
// file. Each master then regularly compares its store with the files its
// own tables say live drivers and apps name (Run): it pulls the missing
// ones from the other voters, verified by digest (anti-entropy, so a
// master that was down during an upload, or lost its disk, catches up),
// and deletes the ones no live row has named for a grace period (garbage
// collection). Masters never agree on a deletion: each decides from its
// own tables, which the Raft log makes the same on all of them.
//
// Master-to-master traffic authenticates as forwarding does (package
// forward): the HTTP client proves this master to its peers (its
// certificate, or without TLS the credential of the raft key). A push
// carries the uploader's credential too, and api.HeaderForwarded, so the
// peer admits it as it would the uploader and stores it without pushing
// it on; a pull carries this master's proof alone, which grants
// auth.BlobRead.
package blobsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/blobs"
	"github.com/drover-project/drover/transport"
)

// stallTimeout ends a push or a pull that moves no byte for this long, or
// whose peer takes this long to answer after the last byte (it fsyncs the
// file first). A fixed deadline would have to fit the largest upload on
// the slowest link; a paused or cut-off peer is given up on as quickly
// whatever the file's size.
const stallTimeout = 30 * time.Second

// maxAnswer bounds the error answer of a peer that is read.
const maxAnswer = 64 << 10

// Peer is one master as a push or a pull reaches it.
type Peer struct {
	ID string
	// HTTP is its API address, host:port; "" while this master has not
	// learned it.
	HTTP string
}

// Config is what the copies are kept by.
type Config struct {
	// Self is this master's ID, sent in api.HeaderForwarded on pushes.
	Self string
	// Scheme is http or https: a cluster's listeners are all one or the
	// other.
	Scheme string
	// Voters returns the voters of the latest Raft configuration, this
	// master included when it is one.
	Voters func() []Peer
	// Live returns the digests of the uploads live drivers and apps name
	// in this master's tables (fsm.LiveUploads).
	Live func() []string
	// Current reports whether this master's tables are current enough to
	// decide that no live row names a file: it knows a leader and has
	// applied every entry it knows committed. Garbage collection waits
	// for it, so that a master restarted from an old snapshot does not
	// delete what the entries after the snapshot name.
	Current func() bool
	// Grace is how long ago a file must have been stored (or uploaded
	// again) before garbage collection may delete it when no live row
	// names it: the time between an upload's acknowledgement and the
	// submission that names it, and a client's retries.
	Grace time.Duration
	// Interval is the time between two passes of anti-entropy and
	// garbage collection.
	Interval time.Duration
}

// Counters is where the passes count what they do (package metrics).
type Counters interface {
	BlobPulled()
	BlobDeleted()
}

// Deps are the parts of the master the copies are kept with.
type Deps struct {
	Store *blobs.Store
	// HTTP carries requests to other masters, proving this master to
	// them: its certificate with TLS, the raft key's credential without.
	HTTP    *http.Client
	Metrics Counters
	Log     *slog.Logger
}

// Replicas keeps one master's part of the copies. Make one with New; Close
// ends the pushes still under way.
type Replicas struct {
	cfg Config
	Deps
	// ctx bounds every push and pull; pushes outlive the upload they
	// serve once a majority holds the file.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// unfound holds the live uploads the last pass could not pull, with
	// why (unfoundAnywhere or noRoom), so that each is logged once for
	// each reason, not at every pass.
	unfound map[string]string
	// doomed holds the files the last pass found past their grace and
	// named by no live row; a file is deleted at the second pass in a
	// row that finds it so. Raft counts an entry applied once it is
	// handed to the tables, a moment before they hold it, and a master
	// that just learned the leader's commit index has not caught up
	// yet: one pass of patience covers both.
	doomed map[string]bool
}

// New returns the Replicas of the master cfg describes; Run starts its
// passes.
func New(cfg Config, d Deps) *Replicas {
	ctx, cancel := context.WithCancel(context.Background())
	return &Replicas{cfg: cfg, Deps: d, ctx: ctx, cancel: cancel, unfound: map[string]string{}, doomed: map[string]bool{}}
}

// Close stops the pushes and pulls under way and waits for them.
func (r *Replicas) Close() {
	r.cancel()
	r.wg.Wait()
}

// Voters is Config.Voters.
func (r *Replicas) Voters() []Peer { return r.cfg.Voters() }

// Pushed is what a Push learned.
type Pushed struct {
	// Held lists the peers that hold the file, in the order they said so.
	Held []string
	// Failed says why each other peer of the push does not hold the
	// file, or that it had not answered yet.
	Failed map[string]string
}

// Push sends the stored file sum to each peer of to at once, with the
// uploader's credential that credential sets, and returns as soon as need
// of them hold it, every one has answered, or ctx ends. A peer that holds
// the file says so before its bytes are sent (Expect: 100-continue), and
// restarts its grace period. Pushes still under way when Push returns go on
// until they end or Close; anti-entropy repairs those that fail.
func (r *Replicas) Push(ctx context.Context, sum string, to []Peer, need int, credential func(http.Header)) Pushed {
	type answer struct {
		id  string
		err error
	}
	answers := make(chan answer, len(to))
	pending := map[string]bool{}
	for _, p := range to {
		pending[p.ID] = true
		r.wg.Go(func() { answers <- answer{p.ID, r.push(p, sum, credential)} })
	}
	out := Pushed{Failed: map[string]string{}}
	for len(out.Held) < need && len(pending) > 0 {
		select {
		case a := <-answers:
			delete(pending, a.id)
			if a.err != nil {
				out.Failed[a.id] = a.err.Error()
			} else {
				out.Held = append(out.Held, a.id)
			}
		case <-ctx.Done():
			for id := range pending {
				out.Failed[id] = "no answer yet"
			}
			return out
		}
	}
	for id := range pending {
		out.Failed[id] = "no answer yet"
	}
	return out
}

// push sends sum to one peer.
func (r *Replicas) push(p Peer, sum string, credential func(http.Header)) error {
	f, info, err := r.Store.File(sum)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, touch, cancel := transport.Idle(r.ctx, stallTimeout)
	defer cancel()
	body := func() io.ReadCloser {
		if info.Size == 0 {
			return http.NoBody
		}
		return io.NopCloser(transport.Touching(io.NewSectionReader(f, 0, info.Size), touch))
	}
	req, err := r.request(ctx, http.MethodPut, p, sum, body())
	if err != nil {
		return err
	}
	req.ContentLength = info.Size
	req.GetBody = func() (io.ReadCloser, error) { return body(), nil }
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(api.HeaderForwarded, r.cfg.Self)
	credential(req.Header)
	resp, err := r.do(ctx, req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Run makes a pass of anti-entropy and garbage collection every Interval
// until stop is closed.
func (r *Replicas) Run(stop <-chan struct{}) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.catchUp()
		r.collect()
	}
}

// Why a live upload was not pulled, as catchUp logs it.
const (
	unfoundAnywhere = "no reachable master holds it"
	noRoom          = "this master's store has no room for it"
)

// catchUp pulls the live uploads this master's store lacks from the other
// voters, in a random order so that masters catching up at once spread
// their load. One the store has no room for (--max-upload-store) is not
// pulled, and is tried again at every pass: the store keeps every file a
// live row names, and makes room only as the others are deleted.
func (r *Replicas) catchUp() {
	var missing []string
	for _, sum := range r.cfg.Live() {
		if _, err := r.Store.Stat(sum); errors.Is(err, api.ErrUnknownBlob) {
			missing = append(missing, sum)
		}
	}
	for sum := range r.unfound {
		if !slices.Contains(missing, sum) {
			delete(r.unfound, sum)
		}
	}
	if len(missing) == 0 {
		return
	}
	var peers []Peer
	for _, p := range r.cfg.Voters() {
		if p.ID != r.cfg.Self {
			peers = append(peers, p)
		}
	}
	for _, sum := range missing {
		rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
		from, err := r.pull(sum, peers)
		why := unfoundAnywhere
		if errors.Is(err, api.ErrNoStorage) {
			why = noRoom
		}
		switch {
		case err == nil:
			r.Metrics.BlobPulled()
			r.Log.Info("pulled an upload a live driver or app names", "sha256", sum, "from", from)
		case r.ctx.Err() != nil:
			return
		case r.unfound[sum] != why:
			r.unfound[sum] = why
			r.Log.Warn("a live driver or app names an upload "+why+"; trying again every pass", "sha256", sum, "why", err)
		}
	}
}

// pull fetches sum from the first of peers that holds it and returns that
// peer's ID. A store with no room for the file (api.ErrNoStorage) ends it:
// no other peer's copy would fit either.
func (r *Replicas) pull(sum string, peers []Peer) (string, error) {
	var why []string
	for _, p := range peers {
		err := r.fetch(p, sum)
		if err == nil {
			return p.ID, nil
		}
		if errors.Is(err, api.ErrNoStorage) {
			return "", err
		}
		why = append(why, p.ID+": "+err.Error())
	}
	if len(why) == 0 {
		return "", errors.New("no other voter")
	}
	return "", errors.New(strings.Join(why, "; "))
}

// fetch copies sum from one peer into the store, which keeps it only when
// it hashes to sum.
func (r *Replicas) fetch(p Peer, sum string) error {
	ctx, touch, cancel := transport.Idle(r.ctx, stallTimeout)
	defer cancel()
	req, err := r.request(ctx, http.MethodGet, p, sum, nil)
	if err != nil {
		return err
	}
	resp, err := r.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _, err = r.Store.Put(sum, resp.ContentLength, transport.Touching(resp.Body, touch))
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// collect deletes the stored files no live row names that were stored
// more than Grace ago, as this pass and the one before found them. The
// store is listed before the live uploads are read, so a file stored
// meanwhile is too young to go, and one named meanwhile is seen named.
func (r *Replicas) collect() {
	if !r.cfg.Current() {
		clear(r.doomed)
		return
	}
	stored, err := r.Store.List()
	if err != nil {
		r.Log.Warn("garbage collection of uploads", "err", err)
		return
	}
	live := map[string]bool{}
	for _, sum := range r.cfg.Live() {
		live[sum] = true
	}
	cutoff := time.Now().Add(-r.cfg.Grace)
	doomed := map[string]bool{}
	for _, info := range stored {
		if live[info.SHA256] || !info.Stored.Before(cutoff) {
			continue
		}
		doomed[info.SHA256] = true
		if !r.doomed[info.SHA256] {
			continue
		}
		deleted, err := r.Store.Delete(info.SHA256, cutoff)
		switch {
		case err != nil:
			r.Log.Warn("garbage collection of uploads", "sha256", info.SHA256, "err", err)
		case deleted:
			r.Metrics.BlobDeleted()
			r.Log.Info("deleted an upload no live driver or app names", "sha256", info.SHA256, "bytes", info.Size,
				"stored", info.Stored.UTC().Format(time.RFC3339))
		}
	}
	r.doomed = doomed
}

// request makes a request for the blob sum on peer p.
func (r *Replicas) request(ctx context.Context, method string, p Peer, sum string, body io.Reader) (*http.Request, error) {
	if p.HTTP == "" {
		return nil, errors.New("its HTTP address is not known yet")
	}
	u := url.URL{Scheme: r.cfg.Scheme, Host: p.HTTP, Path: api.BlobPath(sum)}
	return http.NewRequestWithContext(ctx, method, u.String(), body)
}

// do sends req and returns a 200 answer; any other answer is the error its
// body gives, and a stalled transfer says so.
func (r *Replicas) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	resp, err := r.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, transport.RootCause(err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	var e api.Error
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		return nil, fmt.Errorf("answered %s", resp.Status)
	}
	return nil, e.Err(resp.StatusCode)
}
