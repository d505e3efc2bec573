package testcluster

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/transport/gossip"
)

// metaOnly is the delegate of a bare memberlist member: it gossips its
// metadata and nothing else.
type metaOnly []byte

func (m metaOnly) NodeMeta(int) []byte           { return m }
func (metaOnly) NotifyMsg([]byte)                {}
func (metaOnly) GetBroadcasts(int, int) [][]byte { return nil }
func (metaOnly) LocalState(bool) []byte          { return nil }
func (metaOnly) MergeRemoteState([]byte, bool)   {}

// GossipMember starts a bare memberlist member, not a drover node, on an
// address of the cluster's own: named name, gossiping meta (nil for none)
// and encrypting with key (nil for none). It is what anyone who reaches
// the gossip ports can run, holding the key or not. Cleanup shuts it down.
func (c *Cluster) GossipMember(name string, meta, key []byte) (*memberlist.Memberlist, error) {
	return c.gossipMember(name, meta, key, "")
}

// gossipMember is GossipMember advertising the address advertise
// (host:port) in its alive messages instead of its own, "" for its own:
// memberlist takes the address an alive message gives on its word, so a
// member can claim to gossip from anywhere.
func (c *Cluster) gossipMember(name string, meta, key []byte, advertise string) (*memberlist.Memberlist, error) {
	c.gossipMembers++
	ip := c.ip(200 + c.gossipMembers)
	ports, err := freeport.Get(ip, 1)
	if err != nil {
		return nil, err
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = ip, ports[0], ports[0]
	if advertise != "" {
		host, port, err := net.SplitHostPort(advertise)
		if err != nil {
			return nil, err
		}
		if mc.AdvertisePort, err = strconv.Atoi(port); err != nil {
			return nil, err
		}
		mc.AdvertiseAddr = host
	}
	mc.SecretKey = key
	mc.Delegate = metaOnly(meta)
	mc.LogOutput = io.Discard
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, err
	}
	c.t.Cleanup(func() { _ = ml.Shutdown() })
	return ml, nil
}

// StartGossipImpostor starts a GossipMember named name that gossips meta,
// encoded as every node encodes its own, with the cluster's gossip key:
// what someone who stole the key, or a node gone rogue, can run. It joins
// the pool through every master, again every 200 ms until the test ends,
// so that it is a member as soon as any master's memberlist takes it (a
// name memberlist refuses while its holder lives may be taken once the
// holder left or was forgotten). It returns the member's gossip address.
func (c *Cluster) StartGossipImpostor(name string, meta gossip.Meta) string {
	c.t.Helper()
	return c.StartGossipImpostorAt(name, meta, "")
}

// StartGossipImpostorAt is StartGossipImpostor with a member that gossips
// from an address of its own but advertises advertise (host:port), say
// the gossip address of the node it passes for; "" for its own. It
// returns the address it advertises.
func (c *Cluster) StartGossipImpostorAt(name string, meta gossip.Meta, advertise string) string {
	c.t.Helper()
	b, err := json.Marshal(meta)
	if err != nil {
		c.t.Fatal(err)
	}
	var key []byte
	if c.Secrets != nil {
		k, err := os.ReadFile(c.Secrets.GossipKey)
		if err != nil {
			c.t.Fatal(err)
		}
		if key, err = gossip.ParseKey(string(k)); err != nil {
			c.t.Fatal(err)
		}
	}
	ml, err := c.gossipMember(name, b, key, advertise)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for _, m := range c.Masters {
				_, _ = ml.Join([]string{m.Gossip})
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	// Before GossipMember's shutdown: cleanups run last first.
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	return ml.LocalNode().Address()
}
