package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/wait"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport"
)

// uploadStall gives up on a master that takes no byte of an upload for
// this long, or that does not answer this long after the last one: the
// master stores the file and pushes it to the other voters before it
// answers, which for a large file on a slow link takes a while, but a
// paused or cut-off master should not hold an upload for ever.
// RequestTimeout, which fits a JSON request, does not bound an upload.
const uploadStall = 2 * time.Minute

// Upload stores the file at path on the masters and returns the Artifact
// that names it in a submission (api.SubmitRequest.Artifacts,
// api.RegisterAppRequest.Artifacts): Upload is its SHA-256, Name its base
// name and Mode its permission bits, so an uploaded script stays
// executable when a worker stages it.
//
// The file is hashed, then sent to one master at a time, the one that
// answered last first. That master stores it, pushes it to the other
// voters and answers once a majority of them hold it, so no single
// master's loss can lose it. A master that cannot (503, 429, unreachable,
// or stalled) is followed by the next, in rounds with the client's
// back-off, until ctx ends: ErrNoMaster then, with each master's
// reason. Any other refusal is an *APIError, such as a file over the
// masters' --max-upload (api.ErrTooLarge). A file a master holds already
// is not sent again (Expect: 100-continue), so uploading it again is cheap,
// and restarts the time the masters keep it while no live driver names it
// (--upload-grace).
//
// The file must not change while it is uploaded: the masters refuse bytes
// that do not hash to the digest computed first.
func (c *Client) Upload(ctx context.Context, path string) (model.Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return model.Artifact{}, fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return model.Artifact{}, fmt.Errorf("upload: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return model.Artifact{}, fmt.Errorf("upload: %s is not a regular file", path)
	}
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return model.Artifact{}, fmt.Errorf("upload: read %s: %w", path, err)
	}
	a := model.Artifact{Upload: hex.EncodeToString(h.Sum(nil)), Name: filepath.Base(path), Mode: uint32(fi.Mode().Perm())}
	if _, err := model.NormalizeArtifact(a); err != nil {
		return model.Artifact{}, fmt.Errorf("upload %s: %w", path, err)
	}

	order := c.masters
	if p := c.preferredMaster(); p != "" {
		order = append([]string{p}, slices.DeleteFunc(slices.Clone(c.masters), func(m string) bool { return m == p })...)
	}
	reasons := map[string]string{}
	pause := c.opts.RetryInterval
	for {
		for _, m := range order {
			err := c.upload(ctx, m, a.Upload, f, size)
			if err == nil || isAPIError(err) {
				return a, err
			}
			reasons[m] = err.Error()
			if ctx.Err() != nil {
				break
			}
		}
		if !wait.Sleep(ctx, pause) {
			var rs []string
			for _, m := range c.masters {
				if r, ok := reasons[m]; ok {
					rs = append(rs, r)
				}
			}
			return model.Artifact{}, fmt.Errorf("upload %s: %w: %s", path, ErrNoMaster, strings.Join(rs, "; "))
		}
		pause = min(pause*2, c.opts.MaxRetryInterval)
	}
}

// upload sends the size bytes of f, whose digest is sum, to one master.
func (c *Client) upload(ctx context.Context, master, sum string, f *os.File, size int64) error {
	ctx, touch, cancel := transport.Idle(ctx, uploadStall)
	defer cancel()
	body := func() io.ReadCloser {
		if size == 0 {
			return http.NoBody
		}
		return io.NopCloser(transport.Touching(io.NewSectionReader(f, 0, size), touch))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.scheme+master+api.BlobPath(sum), body())
	if err != nil {
		return &APIError{Status: 0, Message: err.Error()}
	}
	req.ContentLength = size
	req.GetBody = func() (io.ReadCloser, error) { return body(), nil }
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Expect", "100-continue")
	resp, err := c.send(master, req)
	if err != nil {
		if ctx.Err() != nil && !isAPIError(err) {
			return fmt.Errorf("%s: %v", master, context.Cause(ctx))
		}
		return err
	}
	var out api.UploadResponse
	if err := decodeJSON(resp, &out); err != nil {
		return err
	}
	if out.SHA256 != sum {
		return fmt.Errorf("%s stored %q, not %s", master, out.SHA256, sum)
	}
	return nil
}
