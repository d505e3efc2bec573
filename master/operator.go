package master

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/model"
)

// operatorRoutes serves the operator API, operator token only:
//
//	GET  /v1/operator/raft/peers                 -> api.RaftPeers (stale=true for this master's view)
//	POST /v1/operator/raft/add-voter             api.AddVoterRequest -> api.RaftPeers
//	POST /v1/operator/raft/remove-peer           api.RemovePeerRequest -> api.RaftPeers
//	POST /v1/operator/raft/transfer-leadership   api.TransferLeadershipRequest -> api.TransferLeadershipResponse
//	GET  /v1/operator/snapshot                   -> a snapshot archive (application/x-tar)
//	POST /v1/operator/snapshot                   a snapshot archive -> api.RaftPeers
//
// The quorum operations follow Consul's "operator raft" commands on
// hashicorp/raft's membership changes; the archive is a tar of meta.json
// (raft.SnapshotMeta), state.bin (the FSM snapshot) and SHA256SUMS.
func (m *Master) operatorRoutes(mux *http.ServeMux) {
	g := m.guard
	mux.HandleFunc("GET /v1/operator/raft/peers", g.Wrap(auth.Operator, m.reader(m.handlePeers)))
	mux.HandleFunc("POST /v1/operator/raft/add-voter", g.Wrap(auth.Operator, m.leaderOnly(m.handleAddVoter)))
	mux.HandleFunc("POST /v1/operator/raft/remove-peer", g.Wrap(auth.Operator, m.leaderOnly(m.handleRemovePeer)))
	mux.HandleFunc("POST /v1/operator/raft/transfer-leadership", g.Wrap(auth.Operator, m.leaderOnly(m.handleTransferLeadership)))
	mux.HandleFunc("GET /v1/operator/snapshot", g.Wrap(auth.Operator, m.leaderOnly(m.handleSnapshotSave)))
	mux.HandleFunc("POST /v1/operator/snapshot", g.Wrap(auth.Operator, m.leaderOnly(m.handleSnapshotRestore)))
}

// peers is the Raft configuration with each master's HTTP address from
// gossip and the leader marked.
func (m *Master) peers() (api.RaftPeers, error) {
	cf := m.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return api.RaftPeers{}, err
	}
	_, leaderID := m.raft.LeaderWithID()
	out := api.RaftPeers{Index: cf.Index(), Peers: []api.Master{}}
	for _, srv := range cf.Configuration().Servers {
		ms := api.Master{ID: string(srv.ID), RaftAddr: string(srv.Address), Suffrage: srv.Suffrage.String(), Leader: srv.ID == leaderID}
		if string(srv.ID) == m.cfg.ID {
			ms.HTTPAddr = m.cfg.httpAddr()
		} else if meta, ok := m.pool.Lookup(gossip.RoleMaster, string(srv.ID)); ok {
			ms.HTTPAddr = meta.HTTP
		}
		out.Peers = append(out.Peers, ms)
	}
	return out, nil
}

func (m *Master) handlePeers(w http.ResponseWriter, r *http.Request) {
	m.writePeers(w)
}

func (m *Master) writePeers(w http.ResponseWriter) {
	p, err := m.peers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "raft configuration: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// configChangeTimeout bounds a membership change, which waits for the new
// configuration to commit.
const configChangeTimeout = 30 * time.Second

func (m *Master) handleAddVoter(w http.ResponseWriter, r *http.Request) {
	var req api.AddVoterRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !workerIDPattern.MatchString(req.ID) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("master ID %q must match %s", req.ID, workerIDPattern))
		return
	}
	if _, _, err := net.SplitHostPort(req.Address); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("address %q: %v", req.Address, err))
		return
	}
	p, err := m.peers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	for _, s := range p.Peers {
		if s.ID == req.ID && s.RaftAddr == req.Address && s.Suffrage == raft.Voter.String() {
			m.writePeers(w) // already a voter: adding again is a no-op
			return
		}
		if s.ID != req.ID && s.RaftAddr == req.Address {
			writeError(w, http.StatusConflict, fmt.Sprintf("%s is already the address of master %s", req.Address, s.ID))
			return
		}
	}
	if err := m.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.Address), p.Index, configChangeTimeout).Error(); err != nil {
		writeApplyError(w, &unavailableError{err: err})
		return
	}
	m.log.Info("added voter", "id", req.ID, "address", req.Address)
	m.writePeers(w)
}

func (m *Master) handleRemovePeer(w http.ResponseWriter, r *http.Request) {
	var req api.RemovePeerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	p, err := m.peers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if !workerIDPattern.MatchString(req.ID) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("master ID %q must match %s", req.ID, workerIDPattern))
		return
	}
	found := false
	for _, s := range p.Peers {
		found = found || s.ID == req.ID
	}
	if !found {
		m.writePeers(w) // already gone: removing again is a no-op
		return
	}
	if len(p.Peers) == 1 {
		writeError(w, http.StatusConflict, "refusing to remove the last voter")
		return
	}
	// Removing the leader itself makes it step down once the change
	// commits; the client then hears from the next leader.
	if err := m.raft.RemoveServer(raft.ServerID(req.ID), p.Index, configChangeTimeout).Error(); err != nil {
		writeApplyError(w, &unavailableError{err: err})
		return
	}
	m.log.Info("removed peer", "id", req.ID)
	m.writePeers(w)
}

func (m *Master) handleTransferLeadership(w http.ResponseWriter, r *http.Request) {
	var req api.TransferLeadershipRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if (req.From != "" && req.From != m.cfg.ID) || req.ID == m.cfg.ID {
		// Done already, by this request's twin or by another.
		writeJSON(w, http.StatusOK, api.TransferLeadershipResponse{Leader: m.cfg.ID})
		return
	}
	var f raft.Future
	if req.ID == "" {
		f = m.raft.LeadershipTransfer()
	} else {
		p, err := m.peers()
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		var target *api.Master
		for i, s := range p.Peers {
			if s.ID == req.ID {
				target = &p.Peers[i]
			}
		}
		switch {
		case target == nil:
			writeError(w, http.StatusNotFound, fmt.Sprintf("master %q is not in the Raft configuration", req.ID))
			return
		case target.Suffrage != raft.Voter.String():
			writeError(w, http.StatusConflict, fmt.Sprintf("master %s is not a voter", req.ID))
			return
		}
		f = m.raft.LeadershipTransferToServer(raft.ServerID(target.ID), raft.ServerAddress(target.RaftAddr))
	}
	if err := f.Error(); err != nil {
		writeApplyError(w, &unavailableError{err: err})
		return
	}
	leader := m.nextLeader(r.Context())
	m.log.Info("transferred leadership", "to", leader)
	writeJSON(w, http.StatusOK, api.TransferLeadershipResponse{Leader: leader})
}

// nextLeader waits, up to an election timeout, until this master hears
// from a leader other than itself after handing over, and returns its ID
// ("" if none spoke up in time). Raft's transfer completes when the target
// starts its election, before its first heartbeat names it.
func (m *Master) nextLeader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*m.cfg.ElectionTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, id := m.raft.LeaderWithID(); id != "" && string(id) != m.cfg.ID {
			return string(id)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-tick.C:
		}
	}
}

// Files of a snapshot archive.
const (
	snapshotMetaFile  = "meta.json"
	snapshotStateFile = "state.bin"
	snapshotSumsFile  = "SHA256SUMS"
)

// handleSnapshotSave takes a fresh Raft snapshot on the leader and sends it
// as an archive. The state is held in memory once, as the FSM's own
// snapshot is.
func (m *Master) handleSnapshotSave(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(10 * time.Minute))
	f := m.raft.Snapshot()
	if err := f.Error(); err != nil && strings.Contains(err.Error(), "wait until the configuration entry") {
		// hashicorp/raft snapshots only once the tables have applied an
		// entry past the latest membership change; an idle cluster never
		// would. An empty PruneCompleted is such an entry, and changes
		// nothing.
		if _, err := m.apply(model.CmdPruneCompleted, &model.PruneCompleted{}); err != nil {
			writeApplyError(w, err)
			return
		}
		f = m.raft.Snapshot()
	}
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		writeApplyError(w, &unavailableError{err: err})
		return
	}
	meta, rc, err := m.latestSnapshot(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "open snapshot: "+err.Error())
		return
	}
	defer rc.Close()
	state, err := io.ReadAll(rc)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "read snapshot: "+err.Error())
		return
	}
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sums := fmt.Sprintf("%x  %s\n%x  %s\n", sha256.Sum256(metaJSON), snapshotMetaFile, sha256.Sum256(state), snapshotStateFile)
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="drover-%d-%d.snap"`, meta.Term, meta.Index))
	tw := tar.NewWriter(w)
	for _, file := range []struct {
		name string
		data []byte
	}{{snapshotMetaFile, metaJSON}, {snapshotStateFile, state}, {snapshotSumsFile, []byte(sums)}} {
		hdr := &tar.Header{Name: file.name, Mode: 0o600, Size: int64(len(file.data)), ModTime: time.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			return
		}
		if _, err := tw.Write(file.data); err != nil {
			return
		}
	}
	_ = tw.Close()
	m.log.Info("snapshot saved by an operator", "index", meta.Index, "term", meta.Term, "bytes", len(state))
}

// latestSnapshot opens the snapshot f took, or, when there was nothing new
// to snapshot, the newest one on disk.
func (m *Master) latestSnapshot(f raft.SnapshotFuture) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if f.Error() == nil {
		return f.Open()
	}
	metas, err := m.snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(metas) == 0 {
		return nil, nil, errors.New("no snapshot yet")
	}
	return m.snaps.Open(metas[0].ID)
}

// handleSnapshotRestore replaces the cluster's state with an archive's
// (raft.Restore): disaster recovery. The archive is checked whole (its
// checksums, and that the FSM accepts the state) before Raft sees it, so a
// bad file changes nothing.
func (m *Master) handleSnapshotRestore(w http.ResponseWriter, r *http.Request) {
	meta, state, err := readSnapshotArchive(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("snapshot exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, "snapshot archive: "+err.Error())
		return
	}
	if err := fsm.New().Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
		writeError(w, http.StatusBadRequest, "snapshot state: "+err.Error())
		return
	}
	meta.Size = int64(len(state))
	if err := m.raft.Restore(meta, bytes.NewReader(state), configChangeTimeout); err != nil {
		writeApplyError(w, &unavailableError{err: err})
		return
	}
	// IDs continue from the restored tables, not from before.
	m.ids.reset(m.fsm.NextDriverSeq(), m.fsm.NextAppSeq())
	m.log.Info("snapshot restored by an operator", "from_index", meta.Index, "from_term", meta.Term, "bytes", len(state))
	m.writePeers(w)
}

// readSnapshotArchive reads and checks an archive made by
// handleSnapshotSave.
func readSnapshotArchive(rd io.Reader) (*raft.SnapshotMeta, []byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(rd)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		switch hdr.Name {
		case snapshotMetaFile, snapshotStateFile, snapshotSumsFile:
		default:
			return nil, nil, fmt.Errorf("unexpected file %q", hdr.Name)
		}
		if _, dup := files[hdr.Name]; dup {
			return nil, nil, fmt.Errorf("%s twice", hdr.Name)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		files[hdr.Name] = b
	}
	for _, name := range []string{snapshotMetaFile, snapshotStateFile, snapshotSumsFile} {
		if _, ok := files[name]; !ok {
			return nil, nil, fmt.Errorf("%s missing", name)
		}
	}
	want := map[string]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(files[snapshotSumsFile]), []byte("\n")) {
		sum, name, ok := bytes.Cut(line, []byte("  "))
		if !ok {
			return nil, nil, fmt.Errorf("malformed %s line %q", snapshotSumsFile, line)
		}
		want[string(name)] = string(sum)
	}
	for _, name := range []string{snapshotMetaFile, snapshotStateFile} {
		got := sha256.Sum256(files[name])
		if want[name] != hex.EncodeToString(got[:]) {
			return nil, nil, fmt.Errorf("%s does not match its checksum", name)
		}
	}
	var meta raft.SnapshotMeta
	if err := json.Unmarshal(files[snapshotMetaFile], &meta); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", snapshotMetaFile, err)
	}
	return &meta, files[snapshotStateFile], nil
}
