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

// Uploads is the masters' store of uploaded files (client.Upload, a
// worker's fetch, a master's pull). Any master answers and none forwards to
// the leader: every master keeps a store of its own, and the one an upload
// reaches pushes it to the other voters. It embeds its master's one Core.
type Uploads struct {
	*Core
}

// Blob is one stored file: its digest, its size in bytes, and its bytes.
type Blob struct {
	SHA256 string
	Size   int64
	Body   io.ReadSeekCloser
}

// Upload serves V1Upload. An upload another master pushed here
// (c.ForwardedBy) is stored and answered at once: the master the client
// reached does the counting. Otherwise this master pushes the file to the
// other voters and acknowledges it once a majority of the voters of the
// latest Raft configuration hold it (2 of 3, 3 of 5), so losing any one
// master loses no acknowledged file; the pushes that have not answered by
// then go on.
func (s *Uploads) Upload(ctx context.Context, c auth.Caller, sum string, size int64, body io.Reader) (api.UploadResponse, error) {
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

// Blob serves V1Blob.
func (s *Uploads) Blob(_ context.Context, _ auth.Caller, sum string) (*Blob, error) {
	f, info, err := s.Blobs.File(sum)
	if err != nil {
		return nil, fmt.Errorf("master %s: %w", s.cfg.ID, err)
	}
	return &Blob{SHA256: sum, Size: info.Size, Body: f}, nil
}
