package master

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport/gossip"
)

// The leader writes its entries in MessagePack while every voter says in
// the gossip pool that it reads them, and in JSON from the moment one does
// not (a master of an older version), and both apply alike.
func TestLeaderWritesTheFormatEveryVoterReads(t *testing.T) {
	m, err := New(singleConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitReady(t, m)
	n := 0
	// submitted submits a driver and returns the format of its entry.
	submitted := func() byte {
		t.Helper()
		n++
		req := api.SubmitRequest{Token: fmt.Sprint("format-", n), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 1}}
		res, err := m.local.SubmitDriver(context.Background(), auth.Caller{}, req)
		if err != nil {
			t.Fatal(err)
		}
		for i := m.raft.LastIndex(); i > 0; i-- {
			var l raft.Log
			if err := m.store.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
				continue
			}
			if ct, p, err := fsm.Decode(l.Data); err == nil && ct == model.CmdSubmitDriver && p.(*model.SubmitDriver).ID == res.DriverID {
				return l.Data[0]
			}
		}
		t.Fatalf("no entry submitted %s", res.DriverID)
		return 0
	}
	// until submits until a submission's entry is in format want.
	until := func(want byte) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); submitted() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("no entry in format %d within 10 s", want)
			}
		}
	}
	until(fsm.FormatPack)
	meta := gossip.Meta{Role: gossip.RoleMaster, ID: m.cfg.ID, HTTP: m.cfg.httpAddr()}
	if err := m.pool.UpdateMeta(meta, time.Second); err != nil {
		t.Fatal(err)
	}
	until(fsm.FormatJSON)
	meta.LogFormat = fsm.FormatPack
	if err := m.pool.UpdateMeta(meta, time.Second); err != nil {
		t.Fatal(err)
	}
	until(fsm.FormatPack)
	if ds := m.fsm.State().Drivers(); len(ds) != n || m.fsm.Err() != nil {
		t.Fatalf("%d drivers in the tables after %d submissions (Err %v)", len(ds), n, m.fsm.Err())
	}
}
