package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// Namespaces and ACL tokens as operators reach them (Nomad's `namespace
// apply|list|status|delete` and `acl token create|list|delete`): the
// settings are checked here and committed as one entry each, which the
// tables check again.

// Namespaces serves V1Namespaces: every namespace c may see, `default`
// among them, by name, with what its work holds. A namespace token sees
// the namespaces it grants and no other (Nomad lists the namespaces a
// token has a capability in); every other caller sees them all.
func (s *Operator) Namespaces(_ context.Context, c auth.Caller, r Read) ([]api.NamespaceStatus, error) {
	if err := s.readable(r); err != nil {
		return nil, err
	}
	st := s.FSM.State()
	uses, shares := st.NamespaceUses(), fairshare.Compute(fairshare.Inputs(st))
	out := []api.NamespaceStatus{}
	for _, n := range st.Namespaces() {
		if c.InNamespace(n.Name) {
			out = append(out, namespaceStatus(n, uses[n.Name], shares[n.Name].Fair, st.Preemptions(n.Name)))
		}
	}
	return out, nil
}

// Namespace serves V1Namespace: namespace name's settings and use; an
// unknown name is model.ErrUnknownNamespace naming it. A namespace token
// that does not grant name is refused with api.ErrForbidden naming it,
// before the tables are read, so that the refusal says nothing of
// whether the namespace exists.
func (s *Operator) Namespace(_ context.Context, c auth.Caller, name string, r Read) (api.NamespaceStatus, error) {
	if err := checkNamespaceName(name); err != nil {
		return api.NamespaceStatus{}, err
	}
	if err := grantsNamespace(c, name); err != nil {
		return api.NamespaceStatus{}, err
	}
	if err := s.readable(r); err != nil {
		return api.NamespaceStatus{}, err
	}
	return s.namespaceStatus(name)
}

// namespaceStatus is namespace name as the tables hold it now.
func (s *Operator) namespaceStatus(name string) (api.NamespaceStatus, error) {
	st := s.FSM.State()
	n, ok := st.Namespace(name)
	if !ok {
		return api.NamespaceStatus{}, unknownNamespace(name, "")
	}
	return namespaceStatus(n, st.NamespaceUse(name), fairshare.Compute(fairshare.Inputs(st))[name].Fair, st.Preemptions(name)), nil
}

// namespaceStatus is n with its use u, its fair share fair (package
// fairshare's, from the tables as they are) and its preemptions p.
func namespaceStatus(n *model.Namespace, u fsm.NamespaceUse, fair float64, p fsm.Preemptions) api.NamespaceStatus {
	return api.NamespaceStatus{
		Namespace: n,
		Use: api.NamespaceUse{Cores: u.Cores, MemoryMB: u.MemoryMB, Resources: u.Resources, DriverCores: u.DriverCores,
			DriverMemoryMB: u.DriverMemoryMB, RunningDrivers: u.RunningDrivers, Executors: u.Executors},
		Queued: u.Queued, Running: u.RunningDrivers, LiveApps: u.LiveApps, FairShare: fair,
		Preemptions: p.Suffered, PreemptionsCaused: p.Caused,
	}
}

// ApplyNamespace serves V1ApplyNamespace: namespace name gets the
// settings of req (newNamespace), which replace its own, in one
// ApplyNamespace entry.
func (s *Operator) ApplyNamespace(_ context.Context, _ auth.Caller, name string, req api.NamespaceRequest) (api.NamespaceStatus, error) {
	if _, err := s.leading(); err != nil {
		return api.NamespaceStatus{}, err
	}
	n, err := newNamespace(name, req)
	if err != nil {
		return api.NamespaceStatus{}, err
	}
	if _, err := s.Apply(&model.ApplyNamespace{Namespace: *n, Time: now()}); err != nil {
		return api.NamespaceStatus{}, err
	}
	s.Log.Info("applied namespace", "namespace", name, "quota", n.Quota, "max_queued_drivers", n.MaxQueuedDrivers,
		"weight", n.Weight, "driver_share", n.DriverShare, "priority_max", n.PriorityMax, "preempt", n.Preempt)
	return s.namespaceStatus(name)
}

// newNamespace is namespace name with the settings of req and, for each
// one req leaves out, a new namespace's default (api.NamespaceRequest).
// A bound req gives must be positive; the whole is checked by
// model.Namespace.Validate. The error is one line wrapping
// api.ErrInvalidRequest.
func newNamespace(name string, req api.NamespaceRequest) (*model.Namespace, error) {
	n := &model.Namespace{Name: name, Weight: model.DefaultWeight, DriverShare: model.DefaultDriverShare,
		PriorityMax: model.MaxPriority, Preempt: req.Preempt, Quota: model.Quota{Resources: req.Resources}}
	bounds := []struct {
		what string
		v    *int
		to   *int
	}{
		{"the cores quota", req.Cores, &n.Quota.Cores},
		{"the running drivers bound", req.MaxRunningDrivers, &n.Quota.RunningDrivers},
		{"the queued drivers bound", req.MaxQueuedDrivers, &n.MaxQueuedDrivers},
	}
	for _, b := range bounds {
		if b.v == nil {
			continue
		}
		if *b.v <= 0 {
			return nil, api.Errorf(api.ErrInvalidRequest, "%s must be positive, got %d", b.what, *b.v)
		}
		*b.to = *b.v
	}
	if m := req.MemoryMB; m != nil {
		if *m <= 0 {
			return nil, api.Errorf(api.ErrInvalidRequest, "the memory quota must be positive, got %d MiB", *m)
		}
		n.Quota.MemoryMB = *m
	}
	if req.Weight != nil {
		n.Weight = *req.Weight
	}
	if req.DriverShare != nil {
		n.DriverShare = *req.DriverShare
	}
	if req.PriorityMax != nil {
		n.PriorityMax = *req.PriorityMax
	}
	if err := n.Validate(); err != nil {
		return nil, invalidRequest(err)
	}
	if err := n.CheckAskedNamespace(); err != nil {
		return nil, invalidRequest(err)
	}
	return n, nil
}

// DeleteNamespace serves V1DeleteNamespace: namespace name's row goes in
// one DeleteNamespace entry, and with it its name from every ACL token.
// It is refused, before any entry, for an unknown name
// (model.ErrUnknownNamespace), for `default` while it has no settings of
// its own (it always exists), and while the namespace holds drivers or
// apps that have not ended (model.ErrNamespaceInUse, with their counts).
// The answer is the settings deleted.
func (s *Operator) DeleteNamespace(_ context.Context, _ auth.Caller, name string) (*model.Namespace, error) {
	if _, err := s.leading(); err != nil {
		return nil, err
	}
	if err := checkNamespaceName(name); err != nil {
		return nil, err
	}
	st := s.FSM.State()
	n, ok := st.Namespace(name)
	switch {
	case !ok:
		return nil, unknownNamespace(name, "nothing deleted")
	case n.ModifyIndex == 0 && name == model.DefaultNamespace:
		return nil, api.Errorf(api.ErrInvalidRequest, "namespace %s always exists and has no settings of its own: nothing deleted", name)
	}
	if u := st.NamespaceUse(name); u.LiveDrivers > 0 || u.LiveApps > 0 {
		return nil, api.Errorf(model.ErrNamespaceInUse, "namespace %s holds %s and %s that have not ended: nothing deleted; kill them or let them end first",
			name, plural.Count(u.LiveDrivers, "driver"), plural.Count(u.LiveApps, "app"))
	}
	// A schedule would skip every slot with its namespace gone, and its
	// tenant's token, stripped of the namespace, could not reach it.
	// The masters refuse it here; the tables keep applying what they did.
	var held []string
	for _, sc := range st.Schedules() {
		if model.NamespaceOf(sc.Template.Namespace) == name {
			held = append(held, sc.Name)
		}
	}
	if len(held) > 0 {
		names := strings.Join(held[:min(len(held), 5)], ", ")
		if len(held) > 5 {
			names += ", ..."
		}
		return nil, api.Errorf(model.ErrNamespaceInUse, "namespace %s holds %s (%s): nothing deleted; delete them first",
			name, plural.Count(len(held), "schedule"), names)
	}
	if _, err := s.Apply(&model.DeleteNamespace{Name: name, Time: now()}); err != nil {
		return nil, err
	}
	s.Log.Info("deleted namespace", "namespace", name)
	return n, nil
}

// checkNamespace refuses a submission to namespace ns ("" for the
// default) that does not exist (model.ErrUnknownNamespace naming it,
// then what was not done, notDone), or
// at a priority above the namespace's PriorityMax (api.ErrInvalidRequest
// naming the cap), before anything is queued. Priority's range and ns's
// form are the spec's to check (model.DriverSpec.Validate).
func checkNamespace(st *fsm.State, ns string, priority *int, notDone string) error {
	ns = model.NamespaceOf(ns)
	n, ok := st.Namespace(ns)
	if !ok {
		return unknownNamespace(ns, notDone)
	}
	if priority != nil && *priority > n.PriorityMax {
		return api.Errorf(api.ErrInvalidRequest, "priority %d is above namespace %s's --priority-max of %d", *priority, ns, n.PriorityMax)
	}
	return nil
}

// checkNamespaceName refuses a name that is no namespace's
// (model.CheckNamespace) with api.ErrInvalidRequest.
func checkNamespaceName(name string) error {
	return invalidRequest(model.CheckNamespace(name))
}

// unknownNamespace is the refusal naming namespace name, which does not
// exist, and then, unless "", what was not done.
func unknownNamespace(name, notDone string) error {
	if notDone != "" {
		notDone = ": " + notDone
	}
	return api.Errorf(model.ErrUnknownNamespace, "%s: %s%s", model.ErrUnknownNamespace, name, notDone)
}

// tokenSecretPrefix starts every ACL token's secret, so that one found in
// a file or a log reads as a Drover token.
const tokenSecretPrefix = "dns."

// CreateACLToken serves V1CreateACLToken. The master makes the accessor
// (a random UUID, RFC 9562 version 4) and the secret (tokenSecretPrefix
// and 32 random bytes, base64url: a bearer token auth.CheckToken takes),
// and commits a CreateACLToken with the secret's SHA-256 only. The
// secret is in this answer and nowhere else. It is refused, before any
// entry, for a policy other than read or submit, no namespace or more
// than model.MaxTokenNamespaces, one named twice, a name past
// model.MaxTokenNameLen bytes or with control characters, a TTL outside
// api.MinTokenTTL to api.MaxTokenTTL, and a namespace that does not exist
// (model.ErrUnknownNamespace naming it).
func (s *Operator) CreateACLToken(_ context.Context, _ auth.Caller, req api.ACLTokenRequest) (api.ACLTokenCreated, error) {
	if _, err := s.leading(); err != nil {
		return api.ACLTokenCreated{}, err
	}
	if err := validName(req.Name); err != nil {
		return api.ACLTokenCreated{}, err
	}
	if req.TTLMS != 0 && (req.TTLMS < api.MinTokenTTL || req.TTLMS > api.MaxTokenTTL) {
		return api.ACLTokenCreated{}, api.Errorf(api.ErrInvalidRequest, "ttl_ms %d must be from %d (a second) to %d (ten years), or 0 for none",
			req.TTLMS, api.MinTokenTTL, api.MaxTokenTTL)
	}
	secret := tokenSecretPrefix + base64.RawURLEncoding.EncodeToString(randomBytes(32))
	hash := sha256.Sum256([]byte(secret))
	tok := model.ACLToken{Accessor: newAccessor(), SecretHash: hex.EncodeToString(hash[:]), Name: req.Name,
		Policy: req.Policy, Namespaces: req.Namespaces}
	if err := tok.Validate(); err != nil {
		return api.ACLTokenCreated{}, invalidRequest(err)
	}
	st := s.FSM.State()
	for _, ns := range tok.Namespaces {
		if _, ok := st.Namespace(ns); !ok {
			return api.ACLTokenCreated{}, unknownNamespace(ns, "no token made")
		}
	}
	at := now()
	if req.TTLMS > 0 {
		tok.ExpiresAt = at + req.TTLMS
	}
	if _, err := s.Apply(&model.CreateACLToken{Token: tok, Time: at}); err != nil {
		return api.ACLTokenCreated{}, err
	}
	s.Log.Info("created ACL token", "accessor", tok.Accessor, "policy", tok.Policy, "namespaces", tok.Namespaces, "expires_at", tok.ExpiresAt)
	return api.ACLTokenCreated{Accessor: tok.Accessor, Secret: secret, Name: tok.Name, Policy: tok.Policy,
		Namespaces: tok.Namespaces, CreatedAt: at, ExpiresAt: tok.ExpiresAt}, nil
}

// randomBytes returns n bytes of crypto/rand, which never fails.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// newAccessor returns a random UUID (RFC 9562, version 4) in its textual
// form: 128 bits, 122 of them random. Written here on crypto/rand: the
// module has no UUID library, and this is its only use.
func newAccessor() string {
	b := randomBytes(16)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// ACLTokens serves V1ACLTokens: every ACL token by accessor, without its
// secret's hash.
func (s *Operator) ACLTokens(_ context.Context, _ auth.Caller, r Read) ([]*model.ACLToken, error) {
	if err := s.readable(r); err != nil {
		return nil, err
	}
	return s.FSM.State().ACLTokens(), nil
}

// RevokeACLToken serves V1RevokeACLToken: the token goes in one
// RevokeACLToken entry, from whose index every master refuses it. An
// accessor no token has is model.ErrUnknownToken naming it, before any
// entry. The answer is the token revoked, without its hash.
func (s *Operator) RevokeACLToken(_ context.Context, _ auth.Caller, accessor string) (*model.ACLToken, error) {
	if _, err := s.leading(); err != nil {
		return nil, err
	}
	if accessor == "" || len(accessor) > maxAccessorLen {
		return nil, api.Errorf(api.ErrInvalidRequest, "an accessor is 1 to %d bytes, got %d", maxAccessorLen, len(accessor))
	}
	var tok *model.ACLToken
	for _, t := range s.FSM.State().ACLTokens() {
		if t.Accessor == accessor {
			tok = t
		}
	}
	if tok == nil {
		return nil, api.Errorf(model.ErrUnknownToken, "%s: %q", model.ErrUnknownToken, accessor)
	}
	if _, err := s.Apply(&model.RevokeACLToken{Accessor: accessor, Time: now()}); err != nil {
		return nil, err
	}
	s.Log.Info("revoked ACL token", "accessor", accessor)
	return tok, nil
}

// maxAccessorLen bounds an accessor as model.ACLToken.Validate does.
const maxAccessorLen = 64
