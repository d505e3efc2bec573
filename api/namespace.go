package api

import (
	"github.com/drover-project/drover/model"
)

// NamespaceRequest is the body of PUT /v1/namespaces/{name}: the
// namespace's settings, which replace whatever it had, as Nomad's
// `namespace apply` does. A field left out takes the default of a new
// namespace: no quota, no bound on waiting drivers, weight 1
// (model.DefaultWeight), driver share 0.5 (model.DefaultDriverShare),
// highest priority model.MaxPriority and no preemption. A field given is
// a bound, so a zero or negative one is refused (400), as is a weight
// above model.MaxWeight, a driver share above 1 or a highest priority
// past model.MaxPriority. Memory is MiB.
type NamespaceRequest struct {
	Cores             *int                  `json:"cores,omitempty"`
	MemoryMB          *int64                `json:"memory_mb,omitempty"`
	Resources         model.ResourceAmounts `json:"resources,omitempty"`
	MaxRunningDrivers *int                  `json:"max_running_drivers,omitempty"`
	MaxQueuedDrivers  *int                  `json:"max_queued_drivers,omitempty"`
	Weight            *float64              `json:"weight,omitempty"`
	DriverShare       *float64              `json:"driver_share,omitempty"`
	PriorityMax       *int                  `json:"priority_max,omitempty"`
	Preempt           bool                  `json:"preempt,omitempty"`
}

// NamespaceUse is what a namespace's work holds: the cores, memory (MiB)
// and custom resources of its placed drivers and live executors together,
// of its drivers alone (DriverCores, DriverMemoryMB), and how many drivers
// are placed (RunningDrivers) and executors live.
type NamespaceUse struct {
	Cores          int                   `json:"cores"`
	MemoryMB       int64                 `json:"memory_mb"`
	Resources      model.ResourceAmounts `json:"resources,omitempty"`
	DriverCores    int                   `json:"driver_cores"`
	DriverMemoryMB int64                 `json:"driver_memory_mb"`
	RunningDrivers int                   `json:"running_drivers"`
	Executors      int                   `json:"executors"`
}

// NamespaceStatus is one namespace as GET /v1/namespaces lists it: its
// settings (model.Namespace's fields, `default` as model.ImplicitDefault
// until an operator applies it), what its work holds (Use), its drivers
// waiting for a placement (Queued) and placed (Running), and its apps
// that have not ended (LiveApps).
type NamespaceStatus struct {
	*model.Namespace
	Use      NamespaceUse `json:"use"`
	Queued   int          `json:"queued"`
	Running  int          `json:"running"`
	LiveApps int          `json:"live_apps"`
	// FairShare is the fraction of the cluster's dominant resources, 0 to
	// 1, that the weighted dominant-resource fair share gives the
	// namespace (package master/fairshare): 0 for a namespace that holds
	// and waits for nothing.
	FairShare float64 `json:"fair_share"`
	// Preemptions counts the namespace's driver attempts and executors
	// preempted so far for other namespaces, and PreemptionsCaused those
	// of other namespaces preempted for it, each counted once, when its
	// notice was committed.
	Preemptions       int64 `json:"preemptions"`
	PreemptionsCaused int64 `json:"preemptions_caused"`
}

// Bounds of an ACL token's request.
const (
	// MinTokenTTL and MaxTokenTTL bound an ACL token's time to live,
	// in milliseconds: a second, and ten years.
	MinTokenTTL = int64(1000)
	MaxTokenTTL = int64(10 * 365 * 24 * 3600 * 1000)
)

// ACLTokenRequest is the body of POST /v1/acl/tokens: a token for
// Namespaces (1 to model.MaxTokenNamespaces, each existing) with Policy,
// an optional Name (model.MaxTokenNameLen bytes at most), and TTLMS, its
// time to live in milliseconds, MinTokenTTL to MaxTokenTTL; 0 or absent
// for a token that never expires.
type ACLTokenRequest struct {
	Namespaces []string          `json:"namespaces"`
	Policy     model.TokenPolicy `json:"policy"`
	Name       string            `json:"name,omitempty"`
	TTLMS      int64             `json:"ttl_ms,omitempty"`
}

// ACLTokenCreated answers POST /v1/acl/tokens: the new token's Accessor
// (a random UUID, which lists, revokes and names it in logs) and its
// Secret, the bearer credential, shown here once: the masters keep only
// its SHA-256. Times are Unix milliseconds; ExpiresAt 0 never expires.
type ACLTokenCreated struct {
	Accessor   string            `json:"accessor"`
	Secret     string            `json:"secret"`
	Name       string            `json:"name,omitempty"`
	Policy     model.TokenPolicy `json:"policy"`
	Namespaces []string          `json:"namespaces"`
	CreatedAt  int64             `json:"created_at"`
	ExpiresAt  int64             `json:"expires_at,omitempty"`
}
