package master_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// An uploaded file's bytes never enter the Raft log: after a 1 MiB upload
// and a driver naming it, no entry of any master's log holds the file's
// marker, raw or base64 as encoding/json writes a []byte, and the whole
// log is a small fraction of the file. Every log names the digest, so the
// scan does read the entry of the submission.
func TestNoFileBytesInTheRaftLog(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	cl, ctx := c.Client(), c.Context()
	marker := make([]byte, 24)
	if _, err := rand.Read(marker); err != nil {
		t.Fatal(err)
	}
	marker = []byte("drover-upload-marker-" + hex.EncodeToString(marker))
	noise := make([]byte, 1<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	content := slices.Concat(marker, noise, marker)
	path, sum := writeFile(t, "job.bin", string(content), 0o755)
	a, err := cl.Upload(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	req := submitReq()
	req.Artifacts = []model.Artifact{a}
	res, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	awaitEveryMasterKnows(t, c, res.DriverID)
	dirs := make(map[string]string)
	for _, n := range c.Nodes {
		dirs[n.ID] = n.Config.DataDir
		c.Stop(n)
	}

	forms := markerForms(marker)
	for id, dir := range dirs {
		entries, size, namesDigest := 0, 0, false
		eachLogEntry(t, filepath.Join(dir, "raft.db"), func(l *raft.Log) {
			entries++
			size += len(l.Data) + len(l.Extensions)
			for _, f := range forms {
				if bytes.Contains(l.Data, f) || bytes.Contains(l.Extensions, f) {
					t.Errorf("%s: Raft log entry %d (%v) holds the uploaded file's bytes", id, l.Index, l.Type)
				}
			}
			namesDigest = namesDigest || bytes.Contains(l.Data, []byte(sum))
		})
		if !namesDigest {
			t.Errorf("%s: none of its %d log entries names the upload's digest %s: the scan missed the submission", id, entries, sum)
		}
		if size > len(content)/64 {
			t.Errorf("%s: %d log entries hold %d bytes, more than 1/64 of the %d-byte upload", id, entries, size, len(content))
		}
	}
}

// awaitEveryMasterKnows waits until every master's own tables hold driver
// id, so that each has the submission's entry in its log.
func awaitEveryMasterKnows(t *testing.T, c *mastertest.Cluster, id string) {
	t.Helper()
	ctx := c.Context()
	for _, n := range c.Nodes {
		for {
			st, err := c.Client(n).State(ctx)
			if err == nil && slices.ContainsFunc(st.Drivers, func(d *model.Driver) bool { return d.ID == id }) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s never applied the submission of %s (last error %v)", n.ID, id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// markerForms is marker as it would appear in a log entry: raw, and
// base64 at each of the three byte alignments it may take inside a longer
// encoded value (the first and last groups, which depend on the bytes
// around it, dropped).
func markerForms(marker []byte) [][]byte {
	forms := [][]byte{marker}
	for skew := range 3 {
		enc := base64.StdEncoding.EncodeToString(slices.Concat(make([]byte, skew), marker))
		forms = append(forms, []byte(enc[4:len(enc)-4]))
	}
	return forms
}

// eachLogEntry calls f with every entry of the Raft log store at path,
// opened read-only once its master has stopped.
func eachLogEntry(t *testing.T, path string, f func(*raft.Log)) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer store.Close()
	first, err := store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first == 0 || last < first {
		t.Fatalf("%s holds no log entries (first %d, last %d)", path, first, last)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			t.Fatalf("%s: entry %d: %v", path, i, err)
		}
		f(&l)
	}
}
