// Package auth decides who may do what on a master. A caller proves itself
// with a bearer token (RFC 6750) or a certificate of the cluster CA whose
// role it carries (package pki); a browser on the web UI carries its token
// in a cookie instead, which grants reads only. A listener establishes the
// Caller of each request (Guard.Caller); the master's service checks, per
// operation, the Access level it needs (Guard.Check).
//
// The model follows Nomad and Consul: node identity comes from mutual TLS,
// API access from tokens; besides the operator and submit tokens of the
// masters' configuration, the secrets of the replicated table's ACL tokens
// (Nomad's) are namespace tokens, confined to their namespaces. A worker
// certificate names its worker, and acts
// as that worker only (Guard.CheckWorker); without TLS, workers share the
// node token, which grants worker traffic and upload reads and nothing
// else. With no API tokens configured, a CA-signed client or master
// certificate grants API access (Consul's verify_incoming without ACLs);
// with neither TLS nor tokens, everything is open, which a node only
// allows on loopback or with --insecure.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
)

// Access is what a path needs.
type Access int

const (
	// Read is status reads: drivers, apps, logs, the cluster state and
	// the web UI's pages.
	Read Access = iota
	// AppRead is reading one application: its status and its executors'
	// logs. Whoever has Read has it, and a DriverToken for its own
	// application.
	AppRead
	// App is registering an application and driving it: its executors,
	// its watch, its end. A DriverToken has this access to its own
	// application only.
	App
	// Submit is submitting and killing drivers, and App for every
	// application.
	Submit
	// Operator is everything an operator does beyond Submit.
	Operator
	// Node is a worker's own traffic: registration, heartbeats and
	// decommission. Which worker a caller may act as is
	// Guard.CheckWorker's to say.
	Node
	// BlobRead is reading a file of the masters' upload store: who has
	// Node (workers fetch uploads for the attempts they stage, masters
	// pull them from each other) or Submit (who uploads a file may ask
	// whether it is held). Read does not: an uploaded program may carry
	// secrets a status page must not show.
	BlobRead
	// ClusterRead is reading what spans every namespace: the masters'
	// /metrics, whose series name each namespace's quota, use and
	// shares. Whoever has Read has it, but a NamespaceToken, which reads
	// its own namespaces only.
	ClusterRead
)

// String names the access as the docs and errors do.
func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case AppRead:
		return "application read"
	case App:
		return "application"
	case Submit:
		return "submit"
	case Operator:
		return "operator"
	case Node:
		return "worker"
	case BlobRead:
		return "upload read"
	case ClusterRead:
		return "cluster read"
	}
	return "access(" + strconv.Itoa(int(a)) + ")"
}

// Kind is the kind of token a request carried.
type Kind int

// Token kinds.
const (
	NoToken Kind = iota
	OperatorToken
	SubmitToken
	// DriverToken is derived by the leader for one driver attempt and
	// handed to it by its worker (DROVER_TOKEN): it lets that attempt
	// register and drive its own application, nothing else.
	DriverToken
	// NodeToken is the token masters and workers share when they run
	// without TLS: worker traffic (Node) and upload reads (BlobRead),
	// nothing else. With TLS the worker certificate is the credential
	// and the node token grants nothing.
	NodeToken
	// NamespaceToken is the secret of an ACL token of the replicated
	// table (model.ACLToken, Nomad's ACL tokens): reads (model.PolicyRead)
	// or up to Submit (model.PolicySubmit), and the service confines
	// either to the token's namespaces (Identity.InNamespace). It counts
	// only while API tokens are configured (Guard.Tokens).
	NamespaceToken
)

// Identity is who a request comes from.
type Identity struct {
	// Role is the role of the verified client certificate, "" for none.
	Role pki.Role
	// Master is set for a request from another master of this cluster:
	// one with a master certificate (TLS), or with the master credential
	// in api.HeaderMasterCredential (no TLS; Config.MasterCredential).
	// It grants what a master certificate grants.
	Master bool
	// NodeID is the ID of the node the certificate names (pki.IDOf), ""
	// for a certificate that names none or no certificate.
	NodeID string
	// Token is the kind of valid bearer token presented.
	Token Kind
	// DriverID and Attempt name the attempt of a DriverToken.
	DriverID string
	Attempt  int
	// Accessor, Policy and Namespaces describe a NamespaceToken: the
	// accessor names it in errors and logs (it is no secret), the policy
	// is what it may do, and only in the namespaces named.
	Accessor   string
	Policy     model.TokenPolicy
	Namespaces []string
	// Cookie is true when the token came from the CookieName cookie
	// rather than an Authorization header; such a token grants at most
	// Read and AppRead (see Allows).
	Cookie bool
	// token is the bearer token as presented, kept only so that a master
	// forwarding the request to the leader can present it again (see
	// Caller.SetCredential); String never shows it.
	token string
}

// CookieName is the cookie in which a browser carries a token for the web
// UI, since a browser cannot send a bearer token on a link it follows. It
// is honoured only on requests without an Authorization header, and only
// while tokens are configured.
const CookieName = "drover_token"

// MinTokenLen is the shortest token accepted, in bytes: 16 bytes of a
// random base64 string carry 96 bits, beyond guessing over a network.
const MinTokenLen = 16

// Config is the access policy of one master.
type Config struct {
	// OperatorToken, SubmitToken and NodeToken are the bearer tokens; ""
	// disables one. The three must differ.
	OperatorToken string
	SubmitToken   string
	NodeToken     string
	// AllowUnboundWorkerCerts lets a worker certificate that names no
	// worker (one made before certificates named them) act as any
	// worker, for an upgrade; CheckWorker says so in a notice.
	AllowUnboundWorkerCerts bool
	// OpenReads lets Read paths answer without a token or certificate.
	OpenReads bool
	// TLS says the listener uses TLS, so certificate roles count.
	TLS bool
	// MasterCredential is what the masters of a cluster without TLS
	// present to each other in api.HeaderMasterCredential
	// (pki.RaftKey.Credential); "" for none.
	MasterCredential string
	// Now is the master's clock, against which namespace tokens expire
	// (model.ACLToken.ExpiresAt); nil for time.Now.
	Now func() time.Time
}

// ACLTokens looks an ACL token up by the SHA-256 of its secret (64
// lowercase hex digits), as fsm.State.ACLTokenBySecretHash does: the
// master's own applied table, so a revocation counts on each master as
// soon as it has applied it.
type ACLTokens func(secretHash string) (*model.ACLToken, bool)

// CaughtUp reports whether the master's applied table is as current as
// the cluster's: it knows a leader and has applied every entry it knows
// committed (Raft's commit and applied indexes). A master replaying its
// log after a restart has not, and cannot tell a token it does not hold
// yet from one that does not exist.
type CaughtUp func() bool

// Guard enforces a Config. It is safe for concurrent use.
type Guard struct {
	cfg       Config
	operator  [32]byte
	submit    [32]byte
	master    [32]byte
	node      [32]byte
	driverKey []byte
	// acl is the lookup SetACLTokens gave, nil before.
	acl atomic.Pointer[ACLTokens]
	// caughtUp is what SetACLTokens gave, nil for always caught up.
	caughtUp atomic.Pointer[CaughtUp]
}

// New returns a Guard for cfg; a token shorter than MinTokenLen, or one
// with characters outside a bearer token's alphabet, is an error.
func New(cfg Config) (*Guard, error) {
	g := &Guard{cfg: cfg}
	if g.cfg.Now == nil {
		g.cfg.Now = time.Now
	}
	for _, t := range []struct {
		name, tok string
		sum       *[32]byte
	}{{"operator", cfg.OperatorToken, &g.operator}, {"submit", cfg.SubmitToken, &g.submit}, {"node", cfg.NodeToken, &g.node}} {
		if t.tok == "" {
			continue
		}
		if err := CheckToken(t.tok); err != nil {
			return nil, fmt.Errorf("%s token: %w", t.name, err)
		}
		*t.sum = sha256.Sum256([]byte(t.tok))
	}
	g.master = sha256.Sum256([]byte(cfg.MasterCredential))
	if cfg.OperatorToken != "" && cfg.OperatorToken == cfg.SubmitToken {
		return nil, errors.New("the operator and submit tokens must differ")
	}
	if cfg.NodeToken != "" && (cfg.NodeToken == cfg.OperatorToken || cfg.NodeToken == cfg.SubmitToken) {
		// Workers hold the node token: were it an API token, every
		// worker, and every program that reads one, would hold that too.
		return nil, errors.New("the node token must differ from the operator and submit tokens (drover keygen makes one)")
	}
	// Every master derives the same key, so a driver token outlives a
	// change of leader; the submit token is the secret the driver acts for.
	if seed := firstSet(cfg.SubmitToken, cfg.OperatorToken); seed != "" {
		k := sha256.Sum256([]byte("drover driver token key\x00" + seed))
		g.driverKey = k[:]
	}
	return g, nil
}

func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// SetACLTokens makes the Guard recognise the secrets of the ACL tokens
// lookup finds. The table lives in the FSM, which a master opens after
// its Guard, and package auth does not import it: hence a setter.
// caughtUp, nil for always, says whether a token lookup does not find is
// unknown (ErrBadToken, 403) or only not applied here yet (ErrCatchingUp,
// 503, which sends a client on to another master).
func (g *Guard) SetACLTokens(lookup ACLTokens, caughtUp CaughtUp) {
	g.acl.Store(&lookup)
	if caughtUp != nil {
		g.caughtUp.Store(&caughtUp)
	}
}

// Open reports whether the policy lets anyone do anything: no TLS and no
// tokens.
func (g *Guard) Open() bool {
	return !g.cfg.TLS && !g.Tokens() && g.cfg.NodeToken == ""
}

// AnswersAnyone reports whether a caller without any credential may do
// more than ask for health through this policy's listeners: they have
// no TLS, and no tokens or open reads. Such a listener checks the Host of
// each request (transport.Gate): a page of another site that makes a
// browser ask under the page's own name (DNS rebinding) could otherwise
// read, or write, as anyone may. With TLS the browser refuses the node's
// certificate for that name; with tokens it has none to send.
func (g *Guard) AnswersAnyone() bool {
	return g.Open() || !g.cfg.TLS && g.cfg.OpenReads
}

// Tokens reports whether an API token (operator or submit) is configured;
// the node token is not one, since it grants nothing of the API beyond
// workers' own traffic.
func (g *Guard) Tokens() bool { return g.cfg.OperatorToken != "" || g.cfg.SubmitToken != "" }

// CheckToken validates a token's form: at least MinTokenLen bytes of
// RFC 6750's token68 alphabet (letters, digits, -._~+/ and trailing =).
// The error never repeats the token.
func CheckToken(tok string) error {
	if len(tok) < MinTokenLen {
		return fmt.Errorf("is %d bytes, want at least %d (drover keygen makes one)", len(tok), MinTokenLen)
	}
	if len(tok) > api.MaxTokenLen {
		return fmt.Errorf("is %d bytes, want at most %d", len(tok), api.MaxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0
		if !ok {
			return fmt.Errorf("has a character outside A-Z a-z 0-9 -._~+/= at byte %d", i)
		}
	}
	return nil
}

// LoadToken reads a token from file (whitespace around it trimmed) or,
// when file is "", from the environment variable env (pki.ReadSecret). ""
// with a nil error means none was given.
func LoadToken(file, env string) (string, error) {
	tok, from, err := pki.ReadSecret(file, env)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if tok == "" {
		return "", nil
	}
	if err := CheckToken(tok); err != nil {
		return "", fmt.Errorf("token from %s %w", from, err)
	}
	return tok, nil
}

// DriverToken returns the token of one driver attempt, or "" when no token
// is configured. Its form is "drv.<driver ID>.<attempt>.<MAC>" where the
// MAC is HMAC-SHA256 over the driver ID and attempt.
func (g *Guard) DriverToken(driverID string, attempt int) string {
	if g.driverKey == nil {
		return ""
	}
	return "drv." + driverID + "." + strconv.Itoa(attempt) + "." + g.driverMAC(driverID, attempt)
}

func (g *Guard) driverMAC(driverID string, attempt int) string {
	h := hmac.New(sha256.New, g.driverKey)
	h.Write([]byte(driverID + "\x00" + strconv.Itoa(attempt)))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// ErrBadToken is a bearer token that matches none of the configured ones
// nor any namespace token the masters hold. The masters keep only the
// hashes of live namespace tokens and drop a revoked one's, so a token
// revoked and one that never existed cannot be told apart; the message
// names both. (An expired namespace token stays in the table until it is
// revoked, and is refused saying when it expired.)
var ErrBadToken = fmt.Errorf("%w: unknown or revoked token", api.ErrForbidden)

// ErrCatchingUp is a bearer token that matches none while this master has
// not caught up with the log (CaughtUp): the token may be one the leader
// committed and this master has not applied yet, so it is neither
// accepted nor called unknown. The 503 (api.ErrUnavailable) sends a
// client on to another master, as any 503 does.
var ErrCatchingUp = fmt.Errorf("%w: this master is catching up with the log; try another master or retry", api.ErrUnavailable)

// Identify returns who r comes from: its verified certificate's role and
// its bearer token's kind. A token that is present but wrong is
// ErrBadToken (403), never a silent downgrade to anonymous; more than one
// Authorization header is api.ErrInvalidRequest (400), whatever they hold.
//
// Without an Authorization header, a token in the CookieName cookie counts
// instead, marked Identity.Cookie. A master without tokens ignores the
// cookie: there is nothing it could prove, and a browser sends a cookie set
// by another cluster on the same host too.
//
// Another master is recognised by its certificate or, without TLS, by the
// master credential (Identity.Master); a wrong credential is an error
// wrapping api.ErrForbidden (403). A master that has no credential
// configured ignores the header.
// With TLS, the certificate's role and the node it names count; a
// certificate whose node name is malformed (pki.PeerID) is refused with
// api.ErrForbidden rather than taken for one that names no node, which
// AllowUnboundWorkerCerts would let act as any worker.
func (g *Guard) Identify(r *http.Request) (Identity, error) {
	var id Identity
	if g.cfg.TLS && r.TLS != nil {
		id.Role, _ = pki.PeerRole(r.TLS)
		var err error
		if id.NodeID, err = pki.PeerID(r.TLS); err != nil {
			return Identity{}, api.Errorf(api.ErrForbidden, "client %v", err)
		}
	}
	id.Master = id.Role == pki.RoleMaster
	if v := r.Header.Get(api.HeaderMasterCredential); v != "" && g.cfg.MasterCredential != "" {
		sum := sha256.Sum256([]byte(v))
		if subtle.ConstantTimeCompare(sum[:], g.master[:]) != 1 {
			return id, fmt.Errorf("%w: invalid master credential in %s", api.ErrForbidden, api.HeaderMasterCredential)
		}
		id.Master = true
	}
	if n := len(r.Header.Values("Authorization")); n > 1 {
		// Which one counts would be this master's choice, and a proxy
		// on the way may choose another: refuse rather than guess.
		return id, api.Errorf(api.ErrInvalidRequest, "%d Authorization headers, want one", n)
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		c, err := r.Cookie(CookieName)
		if err != nil || c.Value == "" || !g.Tokens() {
			return id, nil
		}
		tid, err := g.IdentifyToken(c.Value)
		if errors.Is(err, api.ErrUnavailable) {
			return id, err
		}
		if err != nil {
			return id, fmt.Errorf("%w in the %s cookie: log in again at /ui/login", ErrBadToken, CookieName)
		}
		tid.Role, tid.NodeID, tid.Master, tid.Cookie, tid.token = id.Role, id.NodeID, id.Master, true, c.Value
		return tid, nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return id, api.Errorf(ErrBadToken, "%v: the Authorization header must be \"Bearer <token>\"", api.ErrForbidden)
	}
	tid, err := g.IdentifyToken(tok)
	if err != nil {
		return id, err
	}
	tid.Role, tid.NodeID, tid.Master, tid.token = id.Role, id.NodeID, id.Master, tok
	return tid, nil
}

// IdentifyToken returns the identity a token proves on its own: its Kind,
// and for a DriverToken its attempt. A token that matches none is
// ErrBadToken.
func (g *Guard) IdentifyToken(tok string) (Identity, error) {
	var id Identity
	sum := sha256.Sum256([]byte(tok))
	switch {
	case g.cfg.OperatorToken != "" && subtle.ConstantTimeCompare(sum[:], g.operator[:]) == 1:
		id.Token = OperatorToken
	case g.cfg.SubmitToken != "" && subtle.ConstantTimeCompare(sum[:], g.submit[:]) == 1:
		id.Token = SubmitToken
	case g.cfg.NodeToken != "" && subtle.ConstantTimeCompare(sum[:], g.node[:]) == 1:
		id.Token = NodeToken
	default:
		if d, n, ok := g.parseDriverToken(tok); ok {
			id.Token, id.DriverID, id.Attempt = DriverToken, d, n
			return id, nil
		}
		return g.identifyACLToken(sum)
	}
	return id, nil
}

// identifyACLToken returns the identity of the ACL token whose secret has
// SHA-256 sum. One the table does not hold (never made, or revoked) is
// ErrBadToken; one that has expired by the master's clock is refused as
// such, naming its accessor, never its secret. On a master without API
// tokens the table does not count: such a master's API is open or kept
// by certificates, and a namespace's confinement would hold nobody else.
func (g *Guard) identifyACLToken(sum [32]byte) (Identity, error) {
	lookup := g.acl.Load()
	if lookup == nil {
		return Identity{}, ErrBadToken
	}
	t, ok := (*lookup)(hex.EncodeToString(sum[:]))
	switch {
	case !ok && !g.isCaughtUp():
		return Identity{}, ErrCatchingUp
	case !ok:
		return Identity{}, ErrBadToken
	case !g.Tokens():
		return Identity{}, fmt.Errorf("%w: namespace token %s counts only on masters run with an operator or submit token (docs/security.md)", api.ErrForbidden, t.Accessor)
	case t.Expired(g.cfg.Now().UnixMilli()):
		return Identity{}, fmt.Errorf("%w: token %s expired at %s", api.ErrForbidden, t.Accessor, time.UnixMilli(t.ExpiresAt).UTC().Format(time.RFC3339))
	}
	return Identity{Token: NamespaceToken, Accessor: t.Accessor, Policy: t.Policy, Namespaces: t.Namespaces}, nil
}

func (g *Guard) isCaughtUp() bool {
	f := g.caughtUp.Load()
	return f == nil || (*f)()
}

func (g *Guard) parseDriverToken(tok string) (string, int, bool) {
	if g.driverKey == nil {
		return "", 0, false
	}
	rest, ok := strings.CutPrefix(tok, "drv.")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return "", 0, false
	}
	head, mac := rest[:i], rest[i+1:]
	j := strings.LastIndexByte(head, '.')
	if j < 0 {
		return "", 0, false
	}
	driverID, attempt := head[:j], head[j+1:]
	n, err := strconv.Atoi(attempt)
	if err != nil || n < 1 || strconv.Itoa(n) != attempt {
		return "", 0, false
	}
	if !hmac.Equal([]byte(mac), []byte(g.driverMAC(driverID, n))) {
		return "", 0, false
	}
	return driverID, n, true
}

// Allows reports whether id may do what needs a. A DriverToken passes App
// and AppRead here; the service then confines it to its own application
// (Identity.OwnsDriver). A NamespaceToken passes Read and AppRead, and
// with model.PolicySubmit App, Submit and BlobRead too; the service then
// confines it to its namespaces (Identity.InNamespace). A NodeToken
// passes Node and BlobRead, and
// elsewhere counts for no more than no token at all. Node says nothing of
// which worker a caller may act as: CheckWorker does. Without API tokens,
// a client or master certificate grants the API (TLS only); the master
// credential of a master without TLS grants Node and BlobRead, as the
// node token does, and nothing of the API.
func (g *Guard) Allows(id Identity, a Access) bool {
	if g.Open() {
		return true
	}
	if a == BlobRead {
		return g.Allows(id, Node) || g.Allows(id, Submit)
	}
	if a == ClusterRead {
		if id.Token == NamespaceToken {
			return false
		}
		a = Read
	}
	if id.Cookie && a != Read && a != AppRead {
		// A browser attaches the cookie to every request to this host,
		// including a form another site makes it post, so a token in a
		// cookie reads and nothing more. A certificate still counts.
		id.Token, id.DriverID, id.Attempt = NoToken, "", 0
	}
	if a == Node {
		// A master passes worker traffic on when it forwards it to the
		// leader, having checked it first.
		if g.cfg.TLS {
			return id.Role == pki.RoleWorker || id.Master
		}
		// The operator token may do anything, and workers presented it
		// before the node token existed (CheckWorker's notice).
		return id.Token == NodeToken || id.Token == OperatorToken || id.Master
	}
	if id.Token == DriverToken {
		return a == App || a == AppRead
	}
	if a == AppRead {
		a = Read
	}
	switch id.Token {
	case OperatorToken:
		return true
	case SubmitToken:
		return a <= Submit
	case NamespaceToken:
		return a == Read || a <= Submit && id.Policy == model.PolicySubmit
	}
	if a == Read && g.cfg.OpenReads {
		return true
	}
	// Without tokens, a CA-signed client or master certificate is the
	// credential, with TLS alone: without it, Master is the raft key's
	// credential, which crosses the network in plain text on every
	// forwarded request and proves no operator.
	if !g.Tokens() && g.cfg.TLS {
		return id.Role == pki.RoleClient || id.Master
	}
	return false
}

// Check decides whether id may do what needs access a. A refusal is an
// error wrapping api.ErrUnauthenticated when the caller brought no
// credential that could grant a (answer 401 with Challenge), and
// api.ErrForbidden when it brought one that does not; its message says
// why in one line and never repeats a token.
func (g *Guard) Check(id Identity, a Access) error {
	if g.Allows(id, a) {
		return nil
	}
	// Once tokens are configured a certificate grants Node access only,
	// so elsewhere a caller with a certificate but no token still lacks
	// the credential: challenge it.
	if id.Token == NoToken && (id.Role == "" || a != Node && g.Tokens()) {
		return api.Errorf(api.ErrUnauthenticated, "%s access needs a token (Authorization: Bearer ...)%s", a, g.certHint(a))
	}
	return api.Errorf(api.ErrForbidden, "%s access denied to %s", a, id)
}

// CheckCredential refuses, with an error wrapping api.ErrUnauthenticated,
// a caller that brings no credential at all (no valid token, no
// certificate) when the masters require one. Such a caller may read at
// most, so a listener refuses its writes before it reads their bodies: a
// body decoded for nobody is memory spent for nothing.
func (g *Guard) CheckCredential(id Identity) error {
	if g.Open() || id.Role != "" || id.Master || id.Token != NoToken {
		return nil
	}
	return api.Errorf(api.ErrUnauthenticated, "this request needs a token (Authorization: Bearer ...)%s", g.certHint(Node))
}

// CheckWorker decides whether id, which has Node access (Check), may act
// as worker workerID: register as it, heartbeat as it (its reports
// included) or decommission it. A refusal wraps api.ErrForbidden and says
// in one line what would be accepted; notice, when not "", is one line
// for the master to log (once per worker): the caller came in a way kept
// only for upgrades.
//
//   - With TLS, a worker certificate acts only as the worker it names
//     (pki.IDOf): "worker certificate of w1 may not act as w2". One that
//     names none, made before certificates named workers, is refused
//     unless AllowUnboundWorkerCerts, and then noticed.
//   - A master (Identity.Master) acts for any worker: masters forward
//     workers' traffic, having checked it first (with TLS a forwarded
//     request names the worker's certificate in api.HeaderForwardedCert,
//     which Caller takes as the identity, and older masters forward
//     without naming it).
//   - Without TLS, the node token names no worker: it acts as any, and
//     the worker's instance secret, which no read shows, is what ties a
//     heartbeat to the process that registered. The operator token acts
//     as any worker too, as workers presented it before the node token
//     existed; that is noticed.
//   - With neither TLS nor tokens, anyone acts as any worker.
func (g *Guard) CheckWorker(id Identity, workerID string) (notice string, err error) {
	switch {
	case g.Open():
		return "", nil
	case id.Master:
		return "", nil
	case g.cfg.TLS && id.Role == pki.RoleWorker && id.NodeID == workerID:
		return "", nil
	case g.cfg.TLS && id.Role == pki.RoleWorker && id.NodeID != "":
		return "", api.Errorf(api.ErrForbidden, "worker certificate of %s may not act as %s", id.NodeID, workerID)
	case g.cfg.TLS && id.Role == pki.RoleWorker && g.cfg.AllowUnboundWorkerCerts:
		return fmt.Sprintf("a worker certificate that names no worker acts as %s (--allow-unbound-worker-certs); reissue it with drover tls cert --role worker --name %s", workerID, workerID), nil
	case g.cfg.TLS && id.Role == pki.RoleWorker:
		return "", api.Errorf(api.ErrForbidden, "worker certificate names no worker, so it may not act as %s: reissue it with drover tls cert --role worker --name %s (or run the masters with --allow-unbound-worker-certs for an upgrade)", workerID, workerID)
	case !g.cfg.TLS && id.Token == NodeToken:
		return "", nil
	case !g.cfg.TLS && id.Token == OperatorToken:
		return fmt.Sprintf("worker %s presents the operator token, which workers no longer hold; give it the node token instead (--node-token-file)", workerID), nil
	}
	return "", api.Errorf(api.ErrForbidden, "%s may not act as worker %s", id, workerID)
}

// Challenge sets the headers of a refusal: the Bearer challenge (RFC 6750)
// when err wraps api.ErrUnauthenticated, and in any case Connection: close,
// so that a refused caller keeps no idle connection to come back on:
// thousands of them would hold a node's descriptors.
func Challenge(h http.Header, err error) {
	h.Set("Connection", "close")
	if errors.Is(err, api.ErrUnauthenticated) {
		h.Set("WWW-Authenticate", `Bearer realm="drover"`)
	}
}

func (g *Guard) certHint(a Access) string {
	if (a == Node || a == BlobRead) && g.cfg.TLS {
		return " or a worker certificate"
	}
	if a == Node {
		return ": workers present the node token (--node-token-file)"
	}
	if !g.Tokens() && g.cfg.TLS {
		return " or a client certificate"
	}
	return ""
}

// Caller is who makes a request, as a listener establishes it before any
// rule applies: the Identity its credentials prove, its IP address (for
// per-client bounds) and, for a request another master forwarded to this
// one, that master's ID and the client's IP there.
type Caller struct {
	Identity
	// IP is the remote address of the connection, without port.
	IP string
	// ForwardedBy is the ID of the master that forwarded the request
	// (api.HeaderForwarded), "" for a request that came straight from
	// its caller. Only a master may forward (Identity.Master).
	ForwardedBy string
	// Client is the IP address of the client at the master its request
	// reached first: IP for a request that came straight from it, the
	// forwarding master's api.HeaderClient for a forwarded one, "" when
	// a forwarding master did not say (one of a release before the
	// header). The leader counts a client's drivers under it.
	Client string
}

// Caller establishes who r comes from (see Identify). api.HeaderForwarded
// counts only on a request from a master (Identity.Master), since a
// forwarded request is exempt from the per-client bounds the forwarding
// master already applied; from anyone else it is ignored, and the request
// is an ordinary one of its caller, bounded as such. An open master (no
// TLS, no tokens), which can tell no master from anyone, honours it from
// anyone: it lets anyone do anything, operator requests included.
// api.HeaderClient, the client's IP at the forwarding master, counts
// where api.HeaderForwarded does, and nowhere else: a caller cannot pass
// for another client.
//
// With TLS, a master certificate that names another master than the
// header is refused with api.ErrForbidden, and a forwarded request's
// Role, NodeID and Master are those of the original caller's certificate
// when the forwarding master names it (api.HeaderForwardedCert), so that
// a worker's certificate binds it on the leader as on the master it
// reached.
func (g *Guard) Caller(r *http.Request) (Caller, error) {
	id, err := g.Identify(r)
	if err != nil {
		return Caller{}, err
	}
	c := Caller{Identity: id, IP: remoteIP(r.RemoteAddr)}
	c.Client = c.IP
	by := r.Header.Get(api.HeaderForwarded)
	if by == "" || !id.Master && !g.Open() {
		return c, nil
	}
	if g.cfg.TLS && id.NodeID != "" && id.NodeID != by {
		return Caller{}, api.Errorf(api.ErrForbidden, "master certificate of %s may not forward as %s", id.NodeID, by)
	}
	c.ForwardedBy, c.Client = by, ""
	if ip := r.Header.Get(api.HeaderClient); ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return Caller{}, api.Errorf(api.ErrInvalidRequest, "%s %q is not an IP address", api.HeaderClient, ip)
		}
		c.Client = a.String()
	}
	if err := c.forwardedCert(g, r.Header.Get(api.HeaderForwardedCert)); err != nil {
		return Caller{}, err
	}
	return c, nil
}

// forwardedCert takes the certificate a forwarding master names in
// api.HeaderForwardedCert (v, "" for none) as the caller's own, so that
// the rules hold the original caller, not the master, to its role and
// node. Without TLS no certificate counts, and the header is ignored.
func (c *Caller) forwardedCert(g *Guard, v string) error {
	if v == "" || !g.cfg.TLS {
		return nil
	}
	role, id, err := pki.ParseNodeURI(v)
	if err != nil {
		return api.Errorf(api.ErrForbidden, "%s: %v", api.HeaderForwardedCert, err)
	}
	c.Role, c.NodeID, c.Master = role, id, role == pki.RoleMaster
	return nil
}

func remoteIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// SetCredential puts the caller's token on h, a request this master sends
// on the caller's behalf, in the form it came: an Authorization header, or
// the CookieName cookie (which grants reads only wherever it arrives). The
// certificate is the forwarding master's own; the caller's, when it had
// one, is named in api.HeaderForwardedCert (pki.NodeURI).
func (c Caller) SetCredential(h http.Header) {
	if c.Role != "" {
		h.Set(api.HeaderForwardedCert, pki.NodeURI(c.Role, c.NodeID))
	}
	switch {
	case c.token == "":
	case c.Cookie:
		h.Set("Cookie", (&http.Cookie{Name: CookieName, Value: c.token}).String())
	default:
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// String describes an identity for errors and logs; it never includes a
// token.
func (id Identity) String() string {
	var parts []string
	switch {
	case id.Role != "" && id.NodeID != "":
		parts = append(parts, string(id.Role)+" certificate of "+id.NodeID)
	case id.Role != "":
		parts = append(parts, string(id.Role)+" certificate")
	case id.Master:
		parts = append(parts, "master credential")
	}
	if tok := id.TokenString(); tok != "" {
		parts = append(parts, tok)
	}
	if len(parts) == 0 {
		return "an anonymous caller"
	}
	return strings.Join(parts, " and ")
}

// TokenString describes the token of id, as String does, without the
// certificate or master credential that came with it; "" for none. A
// refusal of what a token grants names the token alone, so that a
// request another master forwarded (with its own certificate) is refused
// in the words of one sent straight to the leader.
func (id Identity) TokenString() string {
	var s string
	switch id.Token {
	case OperatorToken:
		s = "operator token"
	case SubmitToken:
		s = "submit token"
	case DriverToken:
		s = fmt.Sprintf("token of %s attempt %d", id.DriverID, id.Attempt)
	case NodeToken:
		s = "node token"
	case NamespaceToken:
		s = fmt.Sprintf("%s token %s of namespaces %s", id.Policy, id.Accessor, strings.Join(id.Namespaces, ", "))
		if len(id.Namespaces) == 0 {
			// Deleting a namespace strips it from the tokens that
			// named it, and may leave one naming none.
			s = fmt.Sprintf("%s token %s of no namespace", id.Policy, id.Accessor)
		}
	default:
		return ""
	}
	if id.Cookie {
		// A cookie's token reads only; say where it came from, so a 403
		// explains itself.
		s += " (in the " + CookieName + " cookie, which grants reads only)"
	}
	return s
}

// Recheck refuses, as Identify would now, an identity proved by a
// namespace token that has since been revoked or has expired: what a
// request held open (an event stream, a blocking read, a watch) asks
// before it answers again. Every other identity passes: its credential
// is configuration, which changes only with a restart.
func (g *Guard) Recheck(id Identity) error {
	if id.Token != NamespaceToken {
		return nil
	}
	_, err := g.IdentifyToken(id.token)
	return err
}

// InNamespace reports whether id may see and act on the rows of namespace
// ns ("" is model.DefaultNamespace): a NamespaceToken in the namespaces it
// names only, every other identity everywhere (what it may do there is
// Allows's to say).
func (id Identity) InNamespace(ns string) bool {
	return id.Token != NamespaceToken || slices.Contains(id.Namespaces, model.NamespaceOf(ns))
}

// OwnsDriver reports whether id may act for driverID's attempt: any
// identity but a DriverToken may, and a DriverToken only for its own
// attempt.
func (id Identity) OwnsDriver(driverID string, attempt int) bool {
	return id.Token != DriverToken || (id.DriverID == driverID && id.Attempt == attempt)
}

// CheckExposure applies the closed-by-default rule to a node about to
// listen on bindIP: with neither TLS nor a token, only a loopback address
// is allowed, unless insecure is set. The warning, when not "", is one line
// to log: the node runs open.
func CheckExposure(bindIP string, tls, tokens, insecure bool) (warning string, err error) {
	if tls || tokens {
		return "", nil
	}
	ip := net.ParseIP(bindIP)
	switch {
	case ip != nil && ip.IsLoopback():
		return "no TLS and no tokens: anyone on this machine can submit programs; fine for a loopback experiment, see docs/security.md for production", nil
	case insecure:
		return fmt.Sprintf("--insecure: listening on %s with no TLS and no tokens; anyone who reaches this address can run programs on the workers", bindIP), nil
	}
	return "", fmt.Errorf("refusing to listen on %s with no TLS and no tokens: anyone who reached it could run programs on the workers; give --tls-ca, --tls-cert and --tls-key and/or tokens (docs/security.md), or --insecure to run open anyway", bindIP)
}

// CheckGossipKey applies the rule that a secured node encrypts its gossip:
// with TLS or tokens (tls, tokens), a node without a gossip key (key
// false) refuses to start, in one line that says how to make one. Without
// the key anyone who reaches the gossip port joins the pool and speaks for
// workers and masters, what TLS and tokens close on every other port (as
// Consul pairs ACLs with gossip encryption). On a loopback bindIP,
// insecure waives it with a warning to log: only users of the machine
// reach the port there, the same exposure --insecure accepts for an open
// node; off loopback nothing does.
func CheckGossipKey(bindIP string, tls, tokens, key, insecure bool) (warning string, err error) {
	if key || !tls && !tokens {
		return "", nil
	}
	ip := net.ParseIP(bindIP)
	loopback := ip != nil && ip.IsLoopback()
	if loopback && insecure {
		return "--insecure: TLS or tokens but no gossip key on a loopback address; any user of this machine can join the gossip pool and speak for workers and masters", nil
	}
	waiver := ""
	if loopback {
		waiver = ", or --insecure on this loopback address to run without"
	}
	return "", fmt.Errorf("refusing to start with TLS or tokens but no gossip key: anyone who reached the gossip port could join the pool and speak for workers and masters; make one with `drover keygen > gossip.key` (chmod 600) and give every master and worker --gossip-key-file gossip.key%s (docs/security.md)", waiver)
}
