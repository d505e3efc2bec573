package model

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Namespaces share one cluster between teams (Nomad's namespaces, YARN's
// queues, Kueue's ClusterQueues): every driver, application and executor
// belongs to one, and a namespace bounds what its work holds (Quota),
// how many of its drivers may wait (MaxQueuedDrivers), how much of the
// cluster it gets while others wait too (Weight), how much of that its
// drivers may take (DriverShare), the priorities its submitters may ask
// for (PriorityMax) and whether it takes back its fair share from others
// (Preempt). DefaultNamespace always exists: until an operator applies
// it, it is ImplicitDefault, which bounds nothing, as Spark standalone's
// one FIFO queue.

// Errors of the namespace and token commands, wrapped with the name or
// accessor. Callers map them to HTTP status codes with errors.Is.
var (
	// ErrUnknownNamespace: no namespace of that name.
	ErrUnknownNamespace = errors.New("unknown namespace")
	// ErrNamespaceInUse: the namespace holds drivers or apps that have
	// not ended, so it cannot be deleted.
	ErrNamespaceInUse = errors.New("namespace in use")
	// ErrQueueFull: the namespace's drivers waiting for a placement are at
	// its MaxQueuedDrivers.
	ErrQueueFull = errors.New("namespace queue full")
	// ErrUnknownToken: no ACL token of that accessor.
	ErrUnknownToken = errors.New("unknown token")
	// ErrTokenInUse: a submission or app registration token already
	// names a driver or app of another namespace. A retry key is the
	// submitter's within its namespace: one namespace's key never
	// yields, or blocks, another namespace's row.
	ErrTokenInUse = errors.New("token in use by another namespace")
)

// DefaultNamespace is the namespace of work that names none, and of
// every row written before namespaces existed.
const DefaultNamespace = "default"

// Bounds and defaults of a namespace's settings and of a driver's
// priority.
const (
	// MaxNamespaceLen bounds a namespace's name, in bytes: a DNS label.
	MaxNamespaceLen = 63
	// MaxPriority is the highest priority; 0 is the lowest.
	MaxPriority = 100
	// DefaultPriority is the priority of a driver that asks for none,
	// lowered to its namespace's PriorityMax when that is lower.
	DefaultPriority = 50
	// DefaultWeight is a namespace's weight when applied without one.
	DefaultWeight = 1.0
	// MaxWeight bounds a weight: beyond it a fair share rounds to the
	// whole cluster for one namespace and to nothing for the others.
	MaxWeight = 1e6
	// DefaultDriverShare is the driver share of a namespace applied
	// without one: YARN's Fair Scheduler's maxAMShare.
	DefaultDriverShare = 0.5
	// MinWeight, MaxQuotaCount and MaxQuotaMemoryMB bound what a
	// master takes in a new namespace's settings (CheckAskedNamespace):
	// a weight below MinWeight rounds the namespace's share to nothing,
	// and quotas past the others bound nothing any cluster holds. The
	// tables do not check them, so entries committed before them
	// apply as they did.
	MinWeight        = 1e-3
	MaxQuotaCount    = 1 << 24
	MaxQuotaMemoryMB = 1 << 40
	// MaxNamespaces bounds the namespaces of a cluster, and
	// MaxTokenNamespaces those one token names, so that neither a
	// table nor a token grows without bound.
	MaxNamespaces      = 10000
	MaxTokenNamespaces = 64
)

// Quota bounds what a namespace's placed drivers and live executors hold
// together at any committed index: cores, memory (MiB), each named custom
// resource, and how many of its drivers are placed (RunningDrivers). Zero,
// or a resource not named, bounds nothing. Lowering a quota below what the
// namespace holds ends nothing: nothing more of it is placed until its
// work holds less (Kubernetes' ResourceQuota, Kueue's nominal quota).
type Quota struct {
	Cores          int             `json:"cores,omitempty"`
	MemoryMB       int64           `json:"memory_mb,omitempty"`
	Resources      ResourceAmounts `json:"resources,omitempty"`
	RunningDrivers int             `json:"running_drivers,omitempty"`
}

// Bounded reports whether q bounds anything.
func (q Quota) Bounded() bool {
	return q.Cores > 0 || q.MemoryMB > 0 || len(q.Resources) > 0 || q.RunningDrivers > 0
}

// Namespace is one row of the namespaces table. Times are Unix
// milliseconds chosen by the leader.
type Namespace struct {
	Name  string `json:"name"`
	Quota Quota  `json:"quota"`
	// MaxQueuedDrivers bounds the namespace's drivers waiting for a
	// placement: a submission past it is refused (ErrQueueFull). 0 for
	// no bound.
	MaxQueuedDrivers int `json:"max_queued_drivers,omitempty"`
	// Weight is the namespace's weight in the weighted dominant-resource
	// fair share, positive, at most MaxWeight.
	Weight float64 `json:"weight"`
	// DriverShare is the fraction, in (0, 1], of the namespace's quota
	// (its fair share where it has none) that its drivers may hold, so
	// that they leave the rest to their executors (YARN's
	// maximum-am-resource-percent, Spark 4's spark.deploy.maxDrivers).
	DriverShare float64 `json:"driver_share"`
	// PriorityMax is the highest priority a driver of the namespace may
	// ask for, 0 to MaxPriority.
	PriorityMax int `json:"priority_max"`
	// Preempt lets the namespace take back its fair share from
	// namespaces above theirs while its work waits.
	Preempt     bool   `json:"preempt,omitempty"`
	CreatedAt   int64  `json:"created_at"`
	UpdatedAt   int64  `json:"updated_at"`
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// ImplicitDefault is DefaultNamespace before an operator applies it: no
// quota, weight 1, a driver share of the whole and every priority, so a
// cluster that never names a namespace schedules as it always did.
func ImplicitDefault() *Namespace {
	return &Namespace{Name: DefaultNamespace, Weight: DefaultWeight, DriverShare: 1, PriorityMax: MaxPriority}
}

// Clone returns a deep copy of n.
func (n *Namespace) Clone() *Namespace {
	c := *n
	c.Quota.Resources = maps.Clone(n.Quota.Resources)
	return &c
}

// Priority is the priority a driver of n runs at when it asked for p
// (nil for none): DefaultPriority, lowered to n's PriorityMax.
func (n *Namespace) Priority(p *int) int {
	if p != nil {
		return *p
	}
	return min(DefaultPriority, n.PriorityMax)
}

// Validate checks n's settings on their own: its name (CheckNamespace),
// positive quotas (valid resource names, at most MaxQuotaCount of each), a positive
// weight at most MaxWeight, a driver share in (0, 1] and a PriorityMax of
// 0 to MaxPriority. The error is one line and wraps no sentinel.
func (n *Namespace) Validate() error {
	if err := CheckNamespace(n.Name); err != nil {
		return err
	}
	q := n.Quota
	switch {
	case q.Cores < 0:
		return fmt.Errorf("the cores quota must be positive, got %d", q.Cores)
	case q.MemoryMB < 0:
		return fmt.Errorf("the memory quota must be positive, got %d MiB", q.MemoryMB)
	case q.RunningDrivers < 0:
		return fmt.Errorf("the running drivers bound must be positive, got %d", q.RunningDrivers)
	case n.MaxQueuedDrivers < 0:
		return fmt.Errorf("the queued drivers bound must be positive, got %d", n.MaxQueuedDrivers)
	case math.IsNaN(n.Weight) || n.Weight <= 0 || n.Weight > MaxWeight:
		return fmt.Errorf("the weight must be above 0 and at most %g, got %g", float64(MaxWeight), n.Weight)
	case math.IsNaN(n.DriverShare) || n.DriverShare <= 0 || n.DriverShare > 1:
		return fmt.Errorf("the driver share must be above 0 and at most 1, got %g", n.DriverShare)
	case n.PriorityMax < 0 || n.PriorityMax > MaxPriority:
		return fmt.Errorf("the highest priority must be 0 to %d, got %d", MaxPriority, n.PriorityMax)
	}
	// A quota spans workers: it may name more of a resource than one
	// worker offers (MaxResourceAddresses), up to MaxQuotaCount.
	if err := checkAmounts(q.Resources, MaxQuotaCount); err != nil {
		return fmt.Errorf("the resource quota: %v", err)
	}
	return nil
}

// CheckAskedNamespace checks the bounds a master puts on new settings
// beside Validate's: a weight of at least MinWeight, counts (cores,
// running and queued drivers) of at most MaxQuotaCount and
// memory of at most MaxQuotaMemoryMB. The error is one line naming the
// bound.
func (n *Namespace) CheckAskedNamespace() error {
	if n.Weight < MinWeight {
		return fmt.Errorf("the weight must be at least %g, got %g", MinWeight, n.Weight)
	}
	counts := map[string]int{"the cores quota": n.Quota.Cores, "the running drivers bound": n.Quota.RunningDrivers, "the queued drivers bound": n.MaxQueuedDrivers}
	for _, what := range slices.Sorted(maps.Keys(counts)) {
		if counts[what] > MaxQuotaCount {
			return fmt.Errorf("%s must be at most %d, got %d", what, MaxQuotaCount, counts[what])
		}
	}
	if n.Quota.MemoryMB > MaxQuotaMemoryMB {
		return fmt.Errorf("the memory quota must be at most %d MiB, got %d", int64(MaxQuotaMemoryMB), n.Quota.MemoryMB)
	}
	return nil
}

// CheckNamespace checks a namespace's name: a DNS label (RFC 1123) of at
// most MaxNamespaceLen bytes, lower-case letters, digits and inner
// hyphens, as Kubernetes names its namespaces. The error is one line.
func CheckNamespace(name string) error { return checkLabel("namespace", name) }

// checkLabel checks the name of a what ("namespace", "schedule"): a DNS
// label of at most MaxNamespaceLen bytes. The error is one line.
func checkLabel(what, name string) error {
	if name == "" {
		return fmt.Errorf("the %s name is empty", what)
	}
	if len(name) > MaxNamespaceLen {
		return fmt.Errorf("%s name exceeds %d bytes (it has %d)", what, MaxNamespaceLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(name)-1
		if !ok {
			return fmt.Errorf("%s name %q is not a DNS label (a-z, 0-9 and inner hyphens)", what, name)
		}
	}
	return nil
}

// CheckPriority checks a driver's priority: 0 to MaxPriority.
func CheckPriority(p int) error {
	if p < 0 || p > MaxPriority {
		return fmt.Errorf("priority must be 0 to %d, got %d", MaxPriority, p)
	}
	return nil
}

// NamespaceOf returns the namespace a row names, DefaultNamespace for "".
func NamespaceOf(name string) string {
	if name == "" {
		return DefaultNamespace
	}
	return name
}

// TokenPolicy is what an ACL token may do in its namespaces (Nomad's
// namespace capabilities, in two levels).
type TokenPolicy string

// Token policies.
const (
	// PolicyRead reads the drivers, apps, executors and logs of its
	// namespaces and watches their events.
	PolicyRead TokenPolicy = "read"
	// PolicySubmit is PolicyRead, and submits and kills drivers and
	// registers and drives applications in its namespaces.
	PolicySubmit TokenPolicy = "submit"
)

// Check checks that p is a policy.
func (p TokenPolicy) Check() error {
	if p != PolicyRead && p != PolicySubmit {
		return fmt.Errorf("policy %q is not read or submit", string(p))
	}
	return nil
}

// MaxTokenNameLen bounds an ACL token's name, in bytes.
const MaxTokenNameLen = 256

// ACLToken is one row of the ACL tokens table (Nomad's ACL tokens): a
// credential scoped to namespaces. The masters keep the SHA-256 of its
// secret only, hex encoded; the secret itself is shown once, to whoever
// created it. Times are Unix milliseconds; ExpiresAt 0 never expires.
type ACLToken struct {
	Accessor   string      `json:"accessor"`
	SecretHash string      `json:"secret_hash,omitempty"`
	Name       string      `json:"name,omitempty"`
	Policy     TokenPolicy `json:"policy"`
	Namespaces []string    `json:"namespaces"`
	CreatedAt  int64       `json:"created_at"`
	ExpiresAt  int64       `json:"expires_at,omitempty"`
	// ModifyIndex is the Raft index of the entry that made the row.
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// Clone returns a deep copy of t.
func (t *ACLToken) Clone() *ACLToken {
	c := *t
	c.Namespaces = slices.Clone(t.Namespaces)
	return &c
}

// View returns a copy of t without its secret's hash: the row as reads
// show it.
func (t *ACLToken) View() *ACLToken {
	c := t.Clone()
	c.SecretHash = ""
	return c
}

// Expired reports whether t has expired at now (Unix ms).
func (t *ACLToken) Expired(now int64) bool { return t.ExpiresAt > 0 && now >= t.ExpiresAt }

// Grants reports whether t names namespace ns.
func (t *ACLToken) Grants(ns string) bool { return slices.Contains(t.Namespaces, ns) }

// Validate checks t on its own: an accessor and a 64-digit hex hash, a
// name of at most MaxTokenNameLen bytes, a policy, 1 to
// MaxTokenNamespaces namespaces, each a name (CheckNamespace) and none
// twice. The error is one line and wraps no sentinel.
func (t *ACLToken) Validate() error {
	switch {
	case t.Accessor == "" || len(t.Accessor) > 64:
		return errors.New("the accessor is empty or longer than 64 bytes")
	case len(t.SecretHash) != 64 || strings.Trim(t.SecretHash, "0123456789abcdef") != "":
		return errors.New("the secret's hash is not 64 hex digits")
	case len(t.Name) > MaxTokenNameLen:
		return fmt.Errorf("the token's name exceeds %d bytes", MaxTokenNameLen)
	case len(t.Namespaces) == 0:
		return errors.New("the token names no namespace")
	case len(t.Namespaces) > MaxTokenNamespaces:
		return fmt.Errorf("the token names %d namespaces, at most %d", len(t.Namespaces), MaxTokenNamespaces)
	}
	if err := t.Policy.Check(); err != nil {
		return err
	}
	for i, ns := range t.Namespaces {
		if err := CheckNamespace(ns); err != nil {
			return err
		}
		if slices.Contains(t.Namespaces[:i], ns) {
			return fmt.Errorf("the token names namespace %s twice", ns)
		}
	}
	return nil
}
