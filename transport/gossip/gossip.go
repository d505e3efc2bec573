// Package gossip puts masters and workers into one hashicorp/memberlist pool
// (SWIM with Lifeguard's refinements) and tells its owner who is alive. Each
// member carries its role, ID and HTTP address in its node metadata.
//
// A member is who its name says, and no one else: the pool takes a member
// only under the name its metadata makes (NodeName of its role and ID), and
// memberlist refuses a second member under a name a live member holds, or
// a dead one holds until memberlist forgets it (its alive message from
// another address is a conflict). What memberlist cannot tell, a member
// that took the name of one that left or was forgotten, LookupAt can: its
// owner names the address the member must gossip from and claim. What a
// member says of itself, its address included, is still only its word
// (see LookupAt): the pool is a hint of who is alive, never the source of
// an address to send credentials to.
package gossip

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/internal/warnonce"
	"github.com/hashicorp/memberlist"
)

// Roles a member can have.
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// Meta is the node metadata every member gossips (at most 512 bytes
// encoded, memberlist's limit). Fields added later are ignored by older
// members.
type Meta struct {
	Role string `json:"role"`
	ID   string `json:"id"`
	// HTTP is the host:port of the member's HTTP listener, as the member
	// says: LookupAt holds it against the address its owner knows the
	// node by, and nothing is sent to it.
	HTTP string `json:"http"`
	// Tethered says, of a worker, that its runners end their programs as
	// soon as its daemon dies (unitdir.LeaseContent): a leader that knows
	// the daemon is gone may relaunch its drivers at once. A worker clears
	// it before it detaches, when its programs outlive it for the lease.
	Tethered bool `json:"tethered,omitempty"`
	// LogFormat is, of a master, the newest format of Raft entries it
	// reads (fsm.FormatPack); 0 from a master older than that field. A
	// leader writes an entry format only once every voter reads it.
	LogFormat byte `json:"log_format,omitempty"`
}

// NodeName is the memberlist name of a member: role/ID, unique in the pool.
func NodeName(role, id string) string { return role + "/" + id }

// Config describes one member.
type Config struct {
	Meta   Meta
	BindIP string
	Port   int
	// Profile picks memberlist's timing defaults: "lan" (default),
	// "local" (faster failure detection, loopback or one rack), or "wan".
	Profile string
	// Join lists host:port gossip addresses of other members; the pool
	// retries them in the background until one answers.
	Join []string
	// Discover, when set, returns more addresses to join, learned while
	// the member runs (a master asks its Raft peers, a worker the
	// masters' API); the join loop calls it every round, so it must
	// answer at once from what its owner keeps.
	Discover func() []string
	// OnChange is called (from memberlist's goroutines; it must not block)
	// whenever a member joins, leaves, is declared dead or updates.
	OnChange func()
	Logger   *slog.Logger
	// SecretKey encrypts and authenticates all gossip (UDP and TCP) with
	// AES-GCM through memberlist's keyring: 16, 24 or 32 bytes for
	// AES-128, -192 or -256 (ParseKey decodes one). nil means no
	// encryption; any other length, an empty non-nil key included, is an
	// error from Start. With a key, plain-text gossip is refused both ways,
	// so every member of a pool needs the same key. Start keeps no copy of
	// it outside memberlist and never logs it.
	SecretKey []byte
}

// Pool is a running memberlist member.
type Pool struct {
	ml     *memberlist.Memberlist
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	d      *delegate
}

// ProfileConfig returns memberlist's configuration for a profile name, or an
// error for an unknown one.
func ProfileConfig(profile string) (*memberlist.Config, error) {
	switch profile {
	case "", "lan":
		return memberlist.DefaultLANConfig(), nil
	case "local":
		return memberlist.DefaultLocalConfig(), nil
	case "wan":
		return memberlist.DefaultWANConfig(), nil
	}
	return nil, fmt.Errorf("unknown gossip profile %q (want lan, local or wan)", profile)
}

// ParseKey decodes a gossip key: standard base64 (as "drover keygen"
// prints) of 16, 24 or 32 bytes, for AES-128, -192 or -256. Surrounding
// white space is ignored. Errors never quote s, since it is a secret.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		// The decoder's error gives only an offset, never the input.
		return nil, fmt.Errorf("gossip key is not standard base64: %w", err)
	}
	if err := checkKeyLen(len(key)); err != nil {
		return nil, err
	}
	return key, nil
}

func checkKeyLen(n int) error {
	if n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("gossip key is %d bytes, want 16, 24 or 32 (AES-128, -192 or -256)", n)
	}
	return nil
}

// Start creates the member and starts joining cfg.Join in the background.
func Start(cfg Config) (*Pool, error) {
	mc, err := ProfileConfig(cfg.Profile)
	if err != nil {
		return nil, err
	}
	if cfg.SecretKey != nil {
		if err := checkKeyLen(len(cfg.SecretKey)); err != nil {
			return nil, err
		}
	}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, err
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gossip metadata is %d bytes, limit %d", len(meta), memberlist.MetaMaxSize)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		cfg.Logger = logger
	}
	stdLog := slog.NewLogLogger(logger.With("component", "gossip").Handler(), slog.LevelDebug)
	tr, err := newNetTransport(cfg.BindIP, cfg.Port, &memberlist.NetTransportConfig{Logger: stdLog})
	if err != nil {
		return nil, fmt.Errorf("gossip listen on %s: %w", net.JoinHostPort(cfg.BindIP, strconv.Itoa(cfg.Port)), err)
	}
	if cfg.SecretKey != nil {
		// A copy, so a caller that zeroes or reuses its slice does not
		// change the keyring under memberlist.
		mc.SecretKey = append([]byte(nil), cfg.SecretKey...)
		// Both are memberlist's defaults today; they are what makes the
		// key a gate rather than an option, so they are not left to a
		// default that could change.
		mc.GossipVerifyIncoming = true
		mc.GossipVerifyOutgoing = true
		// The pool keeps cfg for its life; without the key, nothing that
		// prints it can leak the key.
		cfg.SecretKey = nil
	}
	mc.Name = NodeName(cfg.Meta.Role, cfg.Meta.ID)
	mc.BindAddr = cfg.BindIP
	mc.BindPort = cfg.Port
	mc.AdvertiseAddr = cfg.BindIP
	mc.AdvertisePort = tr.GetAutoBindPort()
	mc.Transport = tr
	mc.Logger = stdLog
	d := &delegate{meta: meta, onChange: cfg.OnChange, members: map[string]Member{},
		gone: map[string]time.Time{}, forget: mc.GossipToTheDeadTime, log: logger,
		warned: warnonce.New(logger, maxWarned, "gossip members refused under more names than are logged; further ones are not logged")}
	mc.Delegate = d
	mc.Events = d
	mc.Alive = d
	mc.Conflict = d
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("gossip: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{ml: ml, cfg: cfg, cancel: cancel, done: make(chan struct{}), d: d}
	go p.joinLoop(ctx)
	return p, nil
}

// rejoinInterval is how often a member checks that every address of its
// join list is an alive member, and joins the ones that are not.
const rejoinInterval = 2 * time.Second

// joinLoop keeps the member joined to every address of its join list and
// of Discover, for the member's whole life. memberlist never contacts a
// node again once it has declared it dead, so without this a worker whose
// masters were all down for a while would stay cut off from the restarted
// masters' pool (Serf's reconnect loop does the same job for Consul). An
// address that does not answer is logged once, until it answers.
func (p *Pool) joinLoop(ctx context.Context) {
	defer close(p.done)
	// In memberlist's form (Node.Address), which brackets an IPv6 address.
	self := net.JoinHostPort(p.cfg.BindIP, strconv.Itoa(p.cfg.Port))
	failing := map[string]bool{}
	wait := 200 * time.Millisecond
	for {
		targets := p.joinTargets(self)
		// The delegate's copies, not memberlist's Members: those point
		// into nodes memberlist goes on changing under its own lock.
		alive := map[string]bool{}
		for _, m := range p.Members() {
			alive[m.Addr] = true
		}
		// Each in its own goroutine: an address that swallows packets
		// holds up only its own join, for memberlist's TCP timeout.
		var missing []string
		for _, t := range targets {
			if alive[t] {
				delete(failing, t)
			} else {
				missing = append(missing, t)
			}
		}
		errs := make([]error, len(missing))
		var wg sync.WaitGroup
		for i, t := range missing {
			wg.Go(func() { _, errs[i] = p.ml.Join([]string{t}) })
		}
		wg.Wait()
		joined, tried := 0, len(missing)
		for i, t := range missing {
			switch {
			case errs[i] == nil:
				delete(failing, t)
				joined++
			case !failing[t]:
				p.cfg.Logger.Warn("gossip address does not answer; retrying", "addr", t, "err", errs[i])
				failing[t] = true
			}
		}
		next := rejoinInterval
		if tried > 0 && joined == 0 && tried == len(targets) {
			// Nobody answered and we know no one: retry sooner,
			// backing off.
			next = wait
			wait = min(wait*2, rejoinInterval)
		} else if joined > 0 {
			wait = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// joinTargets is the join list and what Discover returns now, without
// this member's own address, blanks or repeats.
func (p *Pool) joinTargets(self string) []string {
	var out []string
	seen := map[string]bool{self: true, "": true}
	add := func(addrs []string) {
		for _, a := range addrs {
			if a = strings.TrimSpace(a); !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	add(p.cfg.Join)
	if p.cfg.Discover != nil {
		add(p.cfg.Discover())
	}
	return out
}

// UpdateMeta replaces this member's metadata and tells the pool, waiting up
// to timeout in all. memberlist's UpdateNode broadcast goes first, but it
// reaches a few random members, and the rest hear it from them rounds
// later: too late when the member stops gossiping at once (a worker that
// detaches) and a leader acts on the old metadata meanwhile. So it then
// exchanges its state with every alive master directly (memberlist's
// push-pull, as a join does), all at once; each master merges the news
// as it answers. Its Role and ID must stay those of Start's Config: they
// make the node's name. An error says the news may not have reached every
// master.
func (p *Pool) UpdateMeta(m Meta, timeout time.Duration) error {
	if m.Role != p.cfg.Meta.Role || m.ID != p.cfg.Meta.ID {
		return fmt.Errorf("gossip metadata of %s cannot change to role %q, ID %q", NodeName(p.cfg.Meta.Role, p.cfg.Meta.ID), m.Role, m.ID)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > memberlist.MetaMaxSize {
		return fmt.Errorf("gossip metadata is %d bytes, limit %d", len(b), memberlist.MetaMaxSize)
	}
	deadline := time.Now().Add(timeout)
	p.d.mu.Lock()
	p.d.meta = b
	p.d.mu.Unlock()
	if err := p.ml.UpdateNode(timeout); err != nil {
		return err
	}
	return p.pushToMasters(time.Until(deadline))
}

// pushToMasters exchanges this member's state with every other alive
// master over TCP, waiting up to timeout for all of them. An exchange
// still under way then goes on in the background, bounded by memberlist's
// TCPTimeout.
func (p *Pool) pushToMasters(timeout time.Duration) error {
	self := NodeName(p.cfg.Meta.Role, p.cfg.Meta.ID)
	var masters []Member
	for _, m := range p.Members() {
		if m.Role == RoleMaster && NodeName(m.Role, m.ID) != self {
			masters = append(masters, m)
		}
	}
	// Buffered for every answer, so that exchanges still under way at the
	// timeout end without a reader.
	errs := make(chan error, len(masters))
	for _, m := range masters {
		go func() {
			if _, err := p.ml.Join([]string{m.Addr}); err != nil {
				errs <- fmt.Errorf("master %s at %s: %w", m.ID, m.Addr, err)
				return
			}
			errs <- nil
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var failed []error
	for answered := 0; answered < len(masters); answered++ {
		select {
		case err := <-errs:
			if err != nil {
				failed = append(failed, err)
			}
		case <-timer.C:
			failed = append(failed, fmt.Errorf("%d of %d masters did not answer within %s", len(masters)-answered, len(masters), timeout))
			return errors.Join(failed...)
		}
	}
	return errors.Join(failed...)
}

// Addr is the host:port other members reach this one at.
func (p *Pool) Addr() string { return p.ml.LocalNode().Address() }

// Members returns every member memberlist considers alive or suspect, this
// one included, with the address it gossips on.
func (p *Pool) Members() []Member {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	out := make([]Member, 0, len(p.d.members))
	for _, m := range p.d.members {
		out = append(out, m)
	}
	return out
}

// Member is one alive member: its metadata and its gossip address.
type Member struct {
	Meta
	Addr string
}

// From reports whether the member gossips from the host of addr
// (host:port); always, when that host is a name rather than an address
// (see LookupAt).
func (m Member) From(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	want := net.ParseIP(host)
	if want == nil {
		return true
	}
	mine, _, err := net.SplitHostPort(m.Addr)
	return err == nil && want.Equal(net.ParseIP(mine))
}

// Lookup returns the metadata of the alive member with this role and ID,
// wherever it gossips from: for reports of who is in the pool. A decision
// that trusts the member (its liveness) takes LookupAt, and never its
// metadata's HTTP address.
func (p *Pool) Lookup(role, id string) (Meta, bool) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	m, ok := p.d.members[NodeName(role, id)]
	return m.Meta, ok
}

// LookupAt returns the metadata of the alive member with this role and ID
// when it stands for the node its owner knows at addr (host:port): a
// worker's registered HTTP address, or the HTTP address a master gave on
// its Raft port, where masters prove who they are. The member must gossip
// from addr's host, which every node binds its gossip, HTTP and Raft
// listeners to, and its metadata must name addr itself as its HTTP
// address, so that what a member says of its HTTP address is never taken
// in place of the one the owner knows: callers use addr, never Meta.HTTP.
//
// Neither check proves that the member is that node. memberlist takes the
// address an alive message gives without comparing it with where the
// message came from (its aliveNode), and metadata is what a member says,
// so a member holding the pool's key can advertise a departed node's
// address and metadata, and win them with a higher incarnation. What the
// checks stop is a member that took the node's name elsewhere, honestly
// addressed, once the node left or memberlist forgot it. Decisions that a
// lie would turn against the cluster rest on more than this: a worker's
// liveness also on its authenticated heartbeats, a master's HTTP address
// on its Raft port. A host name in addr is not resolved (a lookup is a map
// read, made on every request): a member then passes the host check from
// any address.
func (p *Pool) LookupAt(role, id, addr string) (Meta, bool) {
	p.d.mu.Lock()
	m, ok := p.d.members[NodeName(role, id)]
	p.d.mu.Unlock()
	if !ok || m.HTTP != addr || !m.From(addr) {
		return Meta{}, false
	}
	return m.Meta, true
}

// MemberCounts returns how many members are alive, this one included, and
// how many memberlist declared dead or saw leave on purpose within its
// GossipToTheDeadTime (after which it forgets them as well) and have not
// come back. Alive counts suspect members too, and gone counts dead and
// left ones alike: memberlist keeps both distinctions in fields that none
// of its public methods or notifications lets a caller read safely.
func (p *Pool) MemberCounts() (alive, gone int) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	now := time.Now()
	for name, at := range p.d.gone {
		if now.Sub(at) > p.d.forget {
			delete(p.d.gone, name)
			continue
		}
		gone++
	}
	return len(p.d.members), gone
}

// HealthScore is memberlist's health score of this member (Lifeguard's
// local awareness): 0 while its probes are answered in time, higher while
// it misses acks, which stretches its own probe timeouts. A member whose
// score stays up is likely the slow or cut-off one, rather than the peers
// it suspects.
func (p *Pool) HealthScore() int { return p.ml.GetHealthScore() }

// Leave tells the pool this member is leaving on purpose (memberlist's
// graceful leave), waiting up to timeout for the message to spread, then
// shuts the member down.
func (p *Pool) Leave(timeout time.Duration) error {
	p.cancel()
	<-p.done
	err := p.ml.Leave(timeout)
	if serr := p.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops the member without announcing it; peers will find it dead.
func (p *Pool) Shutdown() error {
	p.cancel()
	// memberlist first: a join in flight to a member that is down would
	// otherwise hold the shutdown for a whole TCP timeout.
	err := p.ml.Shutdown()
	<-p.done
	return err
}

// delegate answers memberlist and keeps the decoded metadata of the members
// memberlist considers alive or suspect, keyed by node name, so lookups
// decode nothing.
type delegate struct {
	onChange func()
	log      *slog.Logger

	mu sync.Mutex
	// meta is this member's encoded Meta (UpdateMeta replaces it).
	meta    []byte
	members map[string]Member
	// gone holds when each member was declared dead or left on purpose,
	// until it comes back or forget passes (memberlist's
	// GossipToTheDeadTime, after which memberlist forgets it too); only
	// counted, for metrics.
	gone   map[string]time.Time
	forget time.Duration
	// warned logs each refused name (and address) once.
	warned *warnonce.Set
}

// maxWarned bounds delegate.warned: a member holding the key could send
// a new name with every message.
const maxWarned = 1024

// errNameNotMeta refuses an alive message whose node name is not the one
// its metadata makes.
var errNameNotMeta = errors.New("the node name is not the role/ID its metadata claims")

// NotifyAlive implements memberlist.AliveDelegate: memberlist takes a member
// (and passes it on to others) only under the name its metadata makes,
// NodeName(role, ID). Names are what memberlist keeps unique; a member
// named one thing that claimed in its metadata to be worker w1 would pass
// for w1 beside the real one, and keep it alive once it died. It is
// logged once per name.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	var m Meta
	if err := json.Unmarshal(n.Meta, &m); err != nil || NodeName(m.Role, m.ID) != n.Name {
		d.warned.Warn("alive\x00"+n.Name, "gossip member ignored: its name is not the role/ID its metadata claims",
			"name", n.Name, "addr", n.Address(), "claims", NodeName(m.Role, m.ID))
		return errNameNotMeta
	}
	return nil
}

// NotifyConflict implements memberlist.ConflictDelegate: memberlist has
// refused a member that claims the name of one it holds, from another
// address (it takes the name over only from a member that left). It is
// logged once per name and address: a worker that restarts on a new
// address after a crash is refused so until memberlist forgets the dead
// one, an impostor for as long as it tries.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.warned.Warn("conflict\x00"+other.Name+"\x00"+other.Address(), "gossip member refused: another member holds its name",
		"name", other.Name, "addr", other.Address(), "holder", existing.Address())
}

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.meta
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.set(n); d.changed() }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.set(n); d.changed() }

// NotifyLeave is called when a member is declared dead or leaves.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	d.mu.Lock()
	delete(d.members, n.Name)
	// Dead and left are one here: memberlist keeps the difference in a
	// field it never copies to n.State.
	d.gone[n.Name] = time.Now()
	d.mu.Unlock()
	d.changed()
}

func (d *delegate) set(n *memberlist.Node) {
	var m Meta
	ok := json.Unmarshal(n.Meta, &m) == nil
	d.mu.Lock()
	delete(d.gone, n.Name)
	if ok {
		d.members[n.Name] = Member{Meta: m, Addr: n.Address()}
	}
	d.mu.Unlock()
}

func (d *delegate) changed() {
	if d.onChange != nil {
		d.onChange()
	}
}
