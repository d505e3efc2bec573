package artifact

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport"
)

// Causes of failed fetches, as the one-line reasons say them.
var (
	// ErrTooLarge: the artifact is larger than Limits.MaxSize.
	ErrTooLarge = errors.New("too large")
	// ErrTimedOut: no byte came for Limits.StallTimeout, or the artifact
	// was not fetched within Limits.Timeout.
	ErrTimedOut = errors.New("timed out")
	// ErrChecksum: the bytes do not have the SHA-256 the artifact names.
	ErrChecksum = errors.New("checksum mismatch")
)

// errStalled cancels a request that received nothing for the stall
// timeout; errDeadline ends an artifact's fetch at its deadline;
// errScheme refuses a redirection to a scheme other than http and https,
// which no try would fetch.
var (
	errStalled  = errors.New("stalled")
	errDeadline = errors.New("deadline")
	errScheme   = errors.New("redirected to a scheme other than http and https")
)

// maxRetryPause caps the back-off between two tries of a download.
const maxRetryPause = 30 * time.Second

// copyBuffer is the size of a download's reads and writes: larger than
// io.Copy's 32 KiB, it cuts a large artifact's system calls, which
// dominate its cold staging on loopback.
const copyBuffer = 1 << 20

// BlobSource reads files from the masters' upload store;
// *client.Client is one (client.OpenBlob).
type BlobSource interface {
	OpenBlob(ctx context.Context, sum string) (io.ReadCloser, error)
}

// NewHTTPClient returns the client that fetches http and https
// artifacts: connections leave from bindIP ("" lets the kernel choose),
// https trusts the system's roots, the environment's proxy settings
// (HTTPS_PROXY, NO_PROXY) apply as they do for other fetchers, and
// nothing bounds a request but its context: the stall and overall
// timeouts of Limits do.
func NewHTTPClient(bindIP string) *http.Client {
	c := transport.NewHTTPClient(bindIP, 0, nil)
	c.Transport.(*http.Transport).Proxy = http.ProxyFromEnvironment
	c.CheckRedirect = checkRedirect
	return c
}

// maxRedirects is how many redirections a fetch follows, as net/http's
// default policy does.
const maxRedirects = 10

// checkRedirect is net/http's default redirect policy, plus a refusal of
// any scheme but http and https (errScheme), which would otherwise be
// retried as a failed connection until the artifact's deadline.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: %s", errScheme, req.URL.Redacted())
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// fetcher fetches one artifact's bytes, retrying what may pass.
type fetcher struct {
	s *Stager
	a model.Artifact
	// lim is s.Limits with defaults applied.
	lim Limits
}

// fetch writes the artifact's bytes to w and returns their SHA-256.
// HTTP and uploads are retried after connection errors, stalls, cut-off
// bodies, 5xx, 408 and 429 answers, pausing RetryBase and doubling up to
// maxRetryPause, until ctx's deadline, and each such failure is told to
// Stager.OnRetry; other refusals (retryStatus), a checksum mismatch,
// ErrTooLarge and a redirection to another scheme end the fetch at once.
func (f *fetcher) fetch(ctx context.Context, w *os.File) (string, error) {
	pause := f.s.retryBase()
	// failed is the cause of the last try that failed before the
	// deadline: a try the deadline cuts short says nothing of the server.
	var failed error
	for tries := 1; ; tries++ {
		sum, retry, err := f.once(ctx, w)
		switch {
		case err == nil:
			return sum, nil
		case ctx.Err() != nil:
			if !errors.Is(err, errDeadline) || failed == nil {
				failed = err
			}
			return "", f.ended(ctx, tries, failed)
		case !retry:
			return "", err
		}
		failed = err
		f.s.log().Warn("artifact fetch failed, retrying", "artifact", f.a.String(), "try", tries, "err", err, "pause", pause)
		if f.s.OnRetry != nil {
			f.s.OnRetry(Retry{Artifact: label(f.a), Try: tries, Err: err, Pause: pause})
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", f.ended(ctx, tries, failed)
		}
		pause = nextPause(pause)
	}
}

// nextPause is the pause before the try after one that came pause after
// its own failure: twice as long, up to maxRetryPause.
func nextPause(pause time.Duration) time.Duration { return min(pause*2, maxRetryPause) }

// ended is the error of a fetch whose context ended after tries, the last
// that failed on its own failing with last: ErrTimedOut at the deadline, the cause of a
// cancellation (a stop) otherwise.
func (f *fetcher) ended(ctx context.Context, tries int, last error) error {
	if !errors.Is(context.Cause(ctx), errDeadline) {
		return context.Cause(ctx)
	}
	if errors.Is(last, errDeadline) {
		return fmt.Errorf("%w after %s (%d tries)", ErrTimedOut, f.lim.Timeout, tries)
	}
	return fmt.Errorf("%w after %s (%d tries; last: %v)", ErrTimedOut, f.lim.Timeout, tries, last)
}

// once is one try: an HTTP GET, or a read from the masters' store.
func (f *fetcher) once(ctx context.Context, w *os.File) (sum string, retry bool, err error) {
	if err := rewind(w); err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(f.lim.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	defer func() {
		// Whatever failed, a stall is what happened.
		if err != nil && errors.Is(context.Cause(ctx), errStalled) {
			sum, retry, err = "", true, fmt.Errorf("%w: no data for %s", ErrTimedOut, f.lim.StallTimeout)
		}
	}()
	body, size, retry, err := f.open(ctx)
	if err != nil {
		return "", retry, err
	}
	defer body.Close()
	if size > f.lim.MaxSize {
		return "", false, f.tooLarge()
	}
	h := sha256.New()
	in := &progress{r: io.LimitReader(body, f.lim.MaxSize+1), stall: stall, after: f.lim.StallTimeout}
	n, err := io.CopyBuffer(io.MultiWriter(w, h), in, make([]byte, copyBuffer))
	switch {
	case n > f.lim.MaxSize:
		return "", false, f.tooLarge()
	case err != nil:
		if ctx.Err() != nil {
			return "", false, context.Cause(ctx)
		}
		// Cut off: the next try may get it whole.
		return "", true, fmt.Errorf("read: %v", transport.RootCause(err))
	}
	return hexSum(h), false, nil
}

// open starts one try and returns the body and its announced size (-1
// when unknown).
func (f *fetcher) open(ctx context.Context) (body io.ReadCloser, size int64, retry bool, err error) {
	if f.a.Upload != "" {
		if f.s.Blobs == nil {
			return nil, 0, false, errors.New("no masters to fetch uploads from")
		}
		body, err := f.s.Blobs.OpenBlob(ctx, f.a.Upload)
		switch {
		case errors.Is(err, api.ErrUnknownBlob):
			return nil, 0, false, errors.New("no master holds it")
		case errors.Is(err, client.ErrNoMaster):
			return nil, 0, true, err
		case err != nil:
			return nil, 0, false, err
		}
		return body, -1, false, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.a.URL, nil)
	if err != nil {
		return nil, 0, false, err
	}
	// The bytes as stored: a transparently gunzipped archive.tar.gz would
	// no longer match its checksum.
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("User-Agent", "drover")
	resp, err := f.s.httpClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, false, context.Cause(ctx)
		}
		// A certificate the worker does not trust stays untrusted:
		// trying again for the whole deadline would only hide why.
		// Nor does a redirection to a scheme this fetcher refuses.
		var cert *tls.CertificateVerificationError
		if errors.Is(err, errScheme) {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, 0, false, err
		}
		return nil, 0, !errors.As(err, &cert), transport.RootCause(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, retryStatus(resp.StatusCode), errors.New(resp.Status)
	}
	return resp.Body, resp.ContentLength, false, nil
}

// retryStatus says whether an HTTP answer other than 200 may pass when
// tried again: a server error (5xx), 408 Request Timeout and 429 Too Many
// Requests, which RFC 9110 and RFC 6585 make transient. Any other
// status (404, 403, 410, a 3xx the client did not follow) would come back
// the same, and ends the fetch at once.
func retryStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// localPrefix names the copy of a file:// artifact in a staging's
// temporary directory, followed by the artifact's index.
const localPrefix = "local-"

// localPath is the path a file:// artifact names, and false for any other.
func localPath(a model.Artifact) (string, bool) {
	if a.Upload != "" {
		return "", false
	}
	u, err := url.Parse(a.URL)
	if err != nil || u.Scheme != "file" {
		return "", false
	}
	return u.Path, true
}

// copyLocal copies the file at path (a file:// URL) to a new file at
// local and returns it as an entry of its own, never the cache's: the
// cache would hand the bytes to a later staging without the open that
// decides who may read them, and a local file gains nothing from it
// but one copy less. The file is opened with the program's rights
// (Stager.openLocal). Its bytes must have the artifact's checksum, when
// it names one. Nothing is retried: the worker's own disk gives the
// same answer twice.
func (f *fetcher) copyLocal(ctx context.Context, path, local string) (*entry, error) {
	src, err := f.s.openLocal(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, f.ended(ctx, 1, err)
		}
		return nil, err
	}
	defer src.Close()
	fi, err := src.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	case fi.Size() > f.lim.MaxSize:
		return nil, f.tooLarge()
	}
	out, err := os.OpenFile(local, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), &ctxReader{ctx: ctx, r: io.LimitReader(src, f.lim.MaxSize+1)})
	switch {
	case err != nil && ctx.Err() != nil:
		err = f.ended(ctx, 1, err)
	case err == nil && n > f.lim.MaxSize:
		err = f.tooLarge()
	case err == nil:
		err = checkSum(f.a.SHA256, hexSum(h))
	}
	if err != nil {
		out.Close()
		return nil, err
	}
	return &entry{f: out, path: local, sum: hexSum(h), size: n, local: true}, nil
}

// openLocal opens path for reading with the program's rights: as Owner
// (openAs) when the program runs as another user than this process, as
// this process otherwise, which is then the program's user. The kernel's
// refusal of Owner reads "user NAME may not read it: permission denied".
func (s *Stager) openLocal(ctx context.Context, path string) (*os.File, error) {
	o := s.Owner
	if o == nil || o.UID == os.Geteuid() {
		f, err := os.Open(path)
		if err != nil {
			return nil, transport.RootCause(err)
		}
		return f, nil
	}
	f, err := openAs(ctx, path, *o)
	var open *os.PathError
	switch {
	case errors.As(err, &open) && errors.Is(open.Err, fs.ErrPermission):
		return nil, fmt.Errorf("user %s may not read it: %w", o.name(), open.Err)
	case errors.As(err, &open):
		return nil, open.Err
	}
	return f, err
}

// checkSum refuses bytes whose SHA-256 is got when the artifact names
// want; an empty want accepts any.
func checkSum(want, got string) error {
	if want != "" && got != want {
		return fmt.Errorf("%w: want %s, got %s", ErrChecksum, want, got)
	}
	return nil
}

func (f *fetcher) tooLarge() error {
	return fmt.Errorf("%w: more than %s", ErrTooLarge, humanSize(f.lim.MaxSize))
}

func rewind(w *os.File) error {
	if err := w.Truncate(0); err != nil {
		return err
	}
	_, err := w.Seek(0, io.SeekStart)
	return err
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// progress restarts the stall timer whenever bytes arrive.
type progress struct {
	r     io.Reader
	stall *time.Timer
	after time.Duration
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.stall.Reset(p.after)
	}
	return n, err
}

// ctxReader stops a local copy once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(b)
}

// humanSize writes n bytes as people read sizes: 512 B, 4.0 MiB.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
