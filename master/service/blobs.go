package service

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/blobsync"
	"github.com/drover-project/drover/security/auth"
)

// BlobService is the masters' store of uploaded files (client.Upload, a
// worker's fetch, a master's pull). Any master answers and none forwards to
// the leader: every master keeps a store of its own, and the one an upload
// reaches pushes it to the other voters.
type BlobService interface {
	// Upload stores the file body carries under its SHA-256 sum (size is
	// the length its sender declared, -1 for none) and answers once a
	// majority of the voters hold it: this master and those it pushed
	// the file to. A file held already is not read again. Too few
	// holders is api.ErrUnavailable naming how many hold it; the bad
	// input package blobs refuses changes nothing.
	Upload(ctx context.Context, c auth.Caller, sum string, size int64, body io.Reader) (api.UploadResponse, error)
	// Blob opens a file of this master's store; the caller closes its
	// Body. api.ErrUnknownBlob when this master holds none by that
	// digest (another may).
	Blob(ctx context.Context, c auth.Caller, sum string) (*Blob, error)
}

// Blob is one stored file: its digest, its size in bytes, and its bytes.
type Blob struct {
	SHA256 string
	Size   int64
	Body   io.ReadSeekCloser
}

// Upload implements BlobService. An upload another master pushed here
// (c.ForwardedBy) is stored and answered at once: the master the client
// reached does the counting. Otherwise this master pushes the file to the
// other voters and acknowledges it once a majority of the voters of the
// latest Raft configuration hold it (2 of 3, 3 of 5), so losing any one
// master loses no acknowledged file; the pushes that have not answered by
// then go on.
func (s *Core) Upload(ctx context.Context, c auth.Caller, sum string, size int64, body io.Reader) (api.UploadResponse, error) {
	info, fresh, err := s.Blobs.Put(sum, size, body)
	if err != nil {
		return api.UploadResponse{}, fmt.Errorf("master %s: %w", s.cfg.ID, err)
	}
	pushed := c.ForwardedBy != ""
	if fresh {
		s.Metrics.BlobUploaded(pushed)
	}
	out := api.UploadResponse{SHA256: sum, Size: info.Size, Held: []string{s.cfg.ID}}
	if pushed {
		return out, nil
	}
	voters := s.Replicas.Voters()
	majority := len(voters)/2 + 1
	var others []blobsync.Peer
	need := majority
	for _, v := range voters {
		if v.ID == s.cfg.ID {
			need--
		} else {
			others = append(others, v)
		}
	}
	if need == majority {
		// This master is no voter (yet): only the voters count.
		out.Held = nil
	}
	res := s.Replicas.Push(ctx, sum, others, need, c.SetCredential)
	out.Held = append(out.Held, res.Held...)
	out.Voters = len(voters)
	if len(out.Held) < majority {
		var why []string
		for _, id := range slices.Sorted(maps.Keys(res.Failed)) {
			why = append(why, id+": "+res.Failed[id])
		}
		return api.UploadResponse{}, api.Errorf(api.ErrUnavailable,
			"upload %s is held by %d of %d voters (%s), %d needed before it is acknowledged: %s",
			sum, len(out.Held), len(voters), strings.Join(out.Held, ", "), majority, strings.Join(why, "; "))
	}
	return out, nil
}

// Blob implements BlobService.
func (s *Core) Blob(_ context.Context, _ auth.Caller, sum string) (*Blob, error) {
	f, info, err := s.Blobs.File(sum)
	if err != nil {
		return nil, fmt.Errorf("master %s: %w", s.cfg.ID, err)
	}
	return &Blob{SHA256: sum, Size: info.Size, Body: f}, nil
}

// Upload takes one of the client IP's upload slots (Bounds.Uploads): each
// upload in flight holds a temp file and pushes to every voter.
func (a *admission) Upload(ctx context.Context, c auth.Caller, sum string, size int64, body io.Reader) (api.UploadResponse, error) {
	release, err := a.slot(c, auth.Submit, a.uploading,
		fmt.Sprintf("this client has %d uploads in flight here, the bound of --max-uploads-per-client; retry once one ends", a.uploading.max))
	if err != nil {
		return api.UploadResponse{}, err
	}
	defer release()
	return a.next.Upload(ctx, c, sum, size, body)
}

func (a *admission) Blob(ctx context.Context, c auth.Caller, sum string) (*Blob, error) {
	return admitted(a, c, auth.BlobRead, func() (*Blob, error) { return a.next.Blob(ctx, c, sum) })
}
