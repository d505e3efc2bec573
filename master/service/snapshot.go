package service

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
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// A snapshot archive is a tar of three files: meta.json (raft.SnapshotMeta),
// state.bin (the FSM's snapshot) and SHA256SUMS (sha256sum's format over
// the other two).
const (
	snapshotMetaFile  = "meta.json"
	snapshotStateFile = "state.bin"
	snapshotSumsFile  = "SHA256SUMS"
)

// SaveSnapshot serves V1SaveSnapshot: it takes a fresh Raft snapshot
// on the leader, or when nothing is new since the last one, sends that.
// The state is held in memory once, as the FSM's own snapshot is.
func (s *Operator) SaveSnapshot(context.Context, auth.Caller) (*Snapshot, error) {
	if _, err := s.leading(); err != nil {
		return nil, err
	}
	f := s.Raft.Snapshot()
	if err := f.Error(); err != nil && strings.Contains(err.Error(), "wait until the configuration entry") {
		// hashicorp/raft snapshots only once the tables have applied an
		// entry past the latest membership change; an idle cluster never
		// would. An empty PruneCompleted is such an entry, and changes
		// nothing.
		if _, err := s.Apply(&model.PruneCompleted{}); err != nil {
			return nil, err
		}
		f = s.Raft.Snapshot()
	}
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, unavailable(err)
	}
	meta, rc, err := latestSnapshot(f, s.Snaps)
	if err != nil {
		return nil, fmt.Errorf("%w: open snapshot: %v", api.ErrInternal, err)
	}
	state, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: read snapshot: %v", api.ErrInternal, err)
	}
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	sums := fmt.Sprintf("%x  %s\n%x  %s\n", sha256.Sum256(metaJSON), snapshotMetaFile, sha256.Sum256(state), snapshotStateFile)
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for _, file := range []struct {
			name string
			data []byte
		}{{snapshotMetaFile, metaJSON}, {snapshotStateFile, state}, {snapshotSumsFile, []byte(sums)}} {
			hdr := &tar.Header{Name: file.name, Mode: 0o600, Size: int64(len(file.data)), ModTime: time.Now()}
			if err := tw.WriteHeader(hdr); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := tw.Write(file.data); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	s.Log.Info("snapshot saved by an operator", "index", meta.Index, "term", meta.Term, "bytes", len(state))
	return &Snapshot{Name: fmt.Sprintf("drover-%d-%d.snap", meta.Term, meta.Index), Body: pr}, nil
}

// latestSnapshot opens the snapshot f took, or, when there was nothing new
// to snapshot, the newest one on disk.
func latestSnapshot(f raft.SnapshotFuture, snaps raft.SnapshotStore) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if f.Error() == nil {
		return f.Open()
	}
	metas, err := snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(metas) == 0 {
		return nil, nil, errors.New("no snapshot yet")
	}
	return snaps.Open(metas[0].ID)
}

// RestoreSnapshot serves V1RestoreSnapshot: disaster recovery
// (raft.Restore). The archive is checked whole (its checksums, and that the
// FSM accepts the state) before Raft sees it, so a bad file changes
// nothing. The restored tables keep the sequence numbers the cluster had
// reached, so no ID given before the restore is given again.
func (s *Operator) RestoreSnapshot(_ context.Context, _ auth.Caller, archive io.Reader) (api.RaftPeers, error) {
	t, err := s.leading()
	if err != nil {
		return api.RaftPeers{}, err
	}
	meta, state, err := readSnapshotArchive(archive)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.RaftPeers{}, api.Errorf(api.ErrTooLarge, "snapshot exceeds %d bytes", mbe.Limit)
		}
		return api.RaftPeers{}, api.Errorf(api.ErrInvalidRequest, "snapshot archive: %v", err)
	}
	if err := fsm.New().Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
		return api.RaftPeers{}, api.Errorf(api.ErrInvalidRequest, "snapshot state: %v", err)
	}
	nextDriver, nextApp := t.IDs.Next()
	state, err = fsm.RaiseSequences(state, max(nextDriver, s.FSM.State().NextDriverSeq()), max(nextApp, s.FSM.State().NextAppSeq()))
	if err != nil {
		return api.RaftPeers{}, fmt.Errorf("%w: %v", api.ErrInternal, err)
	}
	meta.Size = int64(len(state))
	if err := s.Raft.Restore(meta, bytes.NewReader(state), configChangeTimeout); err != nil {
		return api.RaftPeers{}, unavailable(err)
	}
	t.IDs.Raise(s.FSM.State().NextDriverSeq(), s.FSM.State().NextAppSeq())
	s.Log.Info("snapshot restored by an operator", "from_index", meta.Index, "from_term", meta.Term, "bytes", len(state))
	return s.peers()
}

// readSnapshotArchive reads and checks an archive made by SaveSnapshot.
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
	if err := checkSnapshotMeta(&meta); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", snapshotMetaFile, err)
	}
	return &meta, files[snapshotStateFile], nil
}

// maxRestoreIndex bounds the Raft index a restored snapshot may name:
// raft.Restore moves the log past it, and an index near 2^64 would wrap.
// A cluster committing a million entries a second reaches it in some
// 146,000 years.
const maxRestoreIndex = 1 << 62

// checkSnapshotMeta refuses what raft.Restore would refuse only after
// the archive was accepted (a snapshot version it does not know, which
// the caller would get as an unavailable master) or would take to its
// harm (an index that moves the log to near its end).
func checkSnapshotMeta(m *raft.SnapshotMeta) error {
	if m.Version < raft.SnapshotVersionMin || m.Version > raft.SnapshotVersionMax {
		return fmt.Errorf("snapshot version %d of Raft: this release restores versions %d to %d", m.Version, raft.SnapshotVersionMin, raft.SnapshotVersionMax)
	}
	if m.Index > maxRestoreIndex {
		return fmt.Errorf("index %d is past %d, which no cluster reaches", m.Index, uint64(maxRestoreIndex))
	}
	return nil
}
