package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/transport"
)

// RaftPeers returns the Raft configuration (operator token). stale asks any
// master for its own view, which works without a leader.
func (c *Client) RaftPeers(ctx context.Context, stale bool) (*api.RaftPeers, error) {
	path := api.V1RaftPeers.Pattern
	if stale {
		path += "?stale=true"
	}
	var out api.RaftPeers
	return &out, call(ctx, c, api.V1RaftPeers, path, api.NoBody{}, &out)
}

// AddVoter adds a master that runs without --peers as a Raft voter and
// returns the new configuration. Adding a voter again is a no-op.
func (c *Client) AddVoter(ctx context.Context, id, raftAddr string) (*api.RaftPeers, error) {
	var out api.RaftPeers
	return &out, call(ctx, c, api.V1AddVoter, api.V1AddVoter.Pattern, api.AddVoterRequest{ID: id, Address: raftAddr}, &out)
}

// RemovePeer removes a master, alive or dead, from the Raft configuration.
func (c *Client) RemovePeer(ctx context.Context, id string) (*api.RaftPeers, error) {
	var out api.RaftPeers
	return &out, call(ctx, c, api.V1RemovePeer, api.V1RemovePeer.Pattern, api.RemovePeerRequest{ID: id}, &out)
}

// TransferLeadership asks the leader to hand over to id ("" for the most
// up-to-date voter) and returns the new leader's ID. It reads the current
// leader first and sends it as the request's From, so the copies sent to
// every master hand leadership over once.
func (c *Client) TransferLeadership(ctx context.Context, id string) (string, error) {
	p, err := c.RaftPeers(ctx, false)
	if err != nil {
		return "", err
	}
	req := api.TransferLeadershipRequest{ID: id}
	for _, s := range p.Peers {
		if s.Leader {
			req.From = s.ID
		}
	}
	var out api.TransferLeadershipResponse
	err = call(ctx, c, api.V1TransferLeadership, api.V1TransferLeadership.Pattern, req, &out)
	return out.Leader, err
}

// SnapshotSave returns a fresh snapshot archive from the leader. The
// client's MaxResponseBytes must exceed its size.
func (c *Client) SnapshotSave(ctx context.Context) ([]byte, error) {
	resp, err := c.toLeader(ctx, http.MethodGet, "/v1/operator/snapshot", nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// SnapshotRestore replaces the cluster's tables with those of an archive
// from SnapshotSave (disaster recovery) and returns the configuration. It
// is sent once, to the leader: a restore is no write to retry, and a copy
// arriving later would wipe whatever was committed in between.
func (c *Client) SnapshotRestore(ctx context.Context, archive []byte) (*api.RaftPeers, error) {
	resp, err := c.toLeader(ctx, http.MethodPost, "/v1/operator/snapshot", archive, http.Header{"Content-Type": {api.ContentTypeTar}})
	if err != nil {
		return nil, err
	}
	var out api.RaftPeers
	return &out, decodeJSON(resp, &out)
}

// toLeader sends one request, once, to the master the configuration names
// leader (which forwards it, once, should it have just lost leadership),
// instead of to every master as Do does; header is added to the request.
func (c *Client) toLeader(ctx context.Context, method, path string, body []byte, header http.Header) (*Response, error) {
	p, err := c.RaftPeers(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, s := range p.Peers {
		if s.Leader && s.HTTPAddr != "" {
			return c.one(ctx, s.HTTPAddr, method, path, body, header, 0)
		}
	}
	return nil, fmt.Errorf("%w: the configuration names no leader with an HTTP address", ErrNoMaster)
}

// callLeader is call for a write that must be made once (toLeader)
// rather than sent to every master.
func callLeader[In, Out any](ctx context.Context, c *Client, e api.Endpoint[In, Out], path string, in In, out *Out) error {
	var body []byte
	if _, none := any(in).(api.NoBody); !none {
		var err error
		if body, err = api.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	resp, err := c.toLeader(ctx, e.Method, path, body, nil)
	if err != nil {
		return err
	}
	return decodeJSON(resp, out)
}

// maxHealthBytes bounds a health answer, a few checks long.
const maxHealthBytes = 64 << 10

// Health asks one master, and only it, for its own health (GET /v1/health,
// which needs no credential); master is its HTTP address, host:port. A
// degraded master answers too (503 with the same body), so any health
// answer means the master is up and serving; an error means it did not
// answer, or answered with something other than a health report.
func (c *Client) Health(ctx context.Context, master string) (api.Health, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.scheme+master+"/v1/health", nil)
	if err != nil {
		return api.Health{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return api.Health{}, fmt.Errorf("%s: %v", master, transport.RootCause(err))
	}
	defer resp.Body.Close()
	var h api.Health
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return api.Health{}, fmt.Errorf("%s: answered %s, not a health report", master, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxHealthBytes)).Decode(&h); err != nil {
		return api.Health{}, fmt.Errorf("%s: health report: %v", master, err)
	}
	return h, nil
}
