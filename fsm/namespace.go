package fsm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/drover-project/drover/model"
)

// Namespaces and ACL tokens: their apply functions, what each namespace's
// work holds (NamespaceUse), and the quota every placement is checked
// against here, in Apply, so that no committed index places past a
// namespace's quota whatever the leader planned.

// NamespaceUse is what a namespace's work holds and how much of it waits:
// the cores, memory (MiB) and custom resources of its placed drivers and
// live executors together, of its drivers alone, how many of its drivers
// are placed (RunningDrivers) and wait in waitingDrivers (Queued), and its
// drivers and apps that have not ended. AppCoresAsked is what the apps of
// its placed drivers may still be granted by their drivers' AppCores: for
// each placed driver that gave them, its AppCores less the cores the
// live executors of its apps hold, at most its AppCores (an app
// registered with a larger cap takes nothing off the others' asks).
type NamespaceUse struct {
	Cores          int                   `json:"cores"`
	MemoryMB       int64                 `json:"memory_mb"`
	Resources      model.ResourceAmounts `json:"resources,omitempty"`
	DriverCores    int                   `json:"driver_cores"`
	DriverMemoryMB int64                 `json:"driver_memory_mb"`
	RunningDrivers int                   `json:"running_drivers"`
	Executors      int                   `json:"executors"`
	Queued         int                   `json:"queued"`
	LiveDrivers    int                   `json:"live_drivers"`
	LiveApps       int                   `json:"live_apps"`
	AppCoresAsked  int                   `json:"app_cores_asked,omitempty"`
}

// add adds u's counts, times sign (1 or -1), to n.
func (n *NamespaceUse) add(u *NamespaceUse, sign int) {
	n.Cores += sign * u.Cores
	n.MemoryMB += int64(sign) * u.MemoryMB
	n.DriverCores += sign * u.DriverCores
	n.DriverMemoryMB += int64(sign) * u.DriverMemoryMB
	n.RunningDrivers += sign * u.RunningDrivers
	n.Executors += sign * u.Executors
	n.Queued += sign * u.Queued
	n.LiveDrivers += sign * u.LiveDrivers
	n.LiveApps += sign * u.LiveApps
	n.AppCoresAsked += sign * u.AppCoresAsked
	for k, v := range u.Resources {
		if n.Resources == nil {
			n.Resources = model.ResourceAmounts{}
		}
		if n.Resources[k] += sign * v; n.Resources[k] == 0 {
			delete(n.Resources, k)
		}
	}
}

func (n *NamespaceUse) zero() bool {
	return n.Cores == 0 && n.MemoryMB == 0 && len(n.Resources) == 0 && n.DriverCores == 0 && n.DriverMemoryMB == 0 &&
		n.RunningDrivers == 0 && n.Executors == 0 && n.Queued == 0 && n.LiveDrivers == 0 && n.LiveApps == 0 && n.AppCoresAsked == 0
}

// Fits reports whether holding more on top of n stays within q, and if
// not, names the first bound it would pass ("cores", "memory",
// "running drivers" or the resource's name) with the quota and n's use
// of it, for a waiting row's reason.
func (n *NamespaceUse) Fits(q model.Quota, cores int, memoryMB int64, res model.ResourceAmounts, drivers int) (ok bool, bound string, used, quota int64) {
	switch {
	case q.Cores > 0 && n.Cores+cores > q.Cores:
		return false, "cores", int64(n.Cores), int64(q.Cores)
	case q.MemoryMB > 0 && n.MemoryMB+memoryMB > q.MemoryMB:
		return false, "memory", n.MemoryMB, q.MemoryMB
	case q.RunningDrivers > 0 && drivers > 0 && n.RunningDrivers+drivers > q.RunningDrivers:
		return false, "running drivers", int64(n.RunningDrivers), int64(q.RunningDrivers)
	}
	for _, name := range slices.Sorted(maps.Keys(res)) {
		if lim, ok := q.Resources[name]; ok && n.Resources[name]+res[name] > lim {
			return false, name, int64(n.Resources[name]), int64(lim)
		}
	}
	return true, "", 0, 0
}

// nsCharge is what one row adds to its namespace's use.
type nsCharge struct {
	ns string
	u  NamespaceUse
}

// nsUsage is every namespace's use, kept as Apply changes the rows (from
// the rows an entry touched, as liveRows is) so that a placement's quota
// check and the scheduler cost a lookup. Derived: rebuilt on Restore,
// not in snapshots or the state hash. Only rows that have not ended hold
// a charge.
type nsUsage struct {
	by      map[string]*NamespaceUse
	charges map[rowKey]nsCharge
}

func newNSUsage() nsUsage {
	return nsUsage{by: map[string]*NamespaceUse{}, charges: map[rowKey]nsCharge{}}
}

// set replaces the charge of row k by c (none when c is nil).
func (n *nsUsage) set(k rowKey, c *nsCharge) {
	if old, ok := n.charges[k]; ok {
		u := n.by[old.ns]
		u.add(&old.u, -1)
		if u.zero() {
			delete(n.by, old.ns)
		}
		delete(n.charges, k)
	}
	if c == nil {
		return
	}
	u := n.by[c.ns]
	if u == nil {
		u = &NamespaceUse{}
		n.by[c.ns] = u
	}
	u.add(&c.u, 1)
	n.charges[k] = *c
}

// driverCharge is what driver d adds to its namespace's use, nil when it
// has ended.
func driverCharge(d *model.Driver) *nsCharge {
	if d == nil || d.State.Terminal() {
		return nil
	}
	c := &nsCharge{ns: model.NamespaceOf(d.Namespace), u: NamespaceUse{LiveDrivers: 1}}
	if d.WorkerID == "" {
		c.u.Queued = 1
		return c
	}
	c.u.Cores, c.u.MemoryMB, c.u.DriverCores, c.u.DriverMemoryMB, c.u.RunningDrivers = d.Cores, d.MemoryMB, d.Cores, d.MemoryMB, 1
	c.u.AppCoresAsked = d.AppCores
	if len(d.Resources) > 0 {
		c.u.Resources = maps.Clone(d.Resources)
	}
	return c
}

// executorCharge is what live executor e of an app of namespace ns adds.
func executorCharge(e *model.Executor, ns string) *nsCharge {
	if e == nil || e.State.Terminal() {
		return nil
	}
	c := &nsCharge{ns: model.NamespaceOf(ns), u: NamespaceUse{Cores: e.Cores, MemoryMB: e.MemoryMB, Executors: 1}}
	if len(e.Resources) > 0 {
		c.u.Resources = e.Resources.Counts()
	}
	return c
}

// appCharge is what app a adds, nil once it has ended; d is the driver
// that registered it, if any. Its executors' cores, up to d's AppCores,
// come off the ask d's charge made: a live app's driver attempt is
// placed (its end ends the app in the same entry), and AppCores never
// changes, so the two charges cannot disagree.
func appCharge(a *model.App, d *model.Driver) *nsCharge {
	if a == nil || a.State.Terminal() {
		return nil
	}
	c := &nsCharge{ns: model.NamespaceOf(a.Namespace), u: NamespaceUse{LiveApps: 1}}
	if d != nil && a.DriverID == d.ID {
		c.u.AppCoresAsked = -min(a.CoresGranted, d.AppCores)
	}
	return c
}

// charge brings the use up to date with row k as the tables hold it now.
func (t *tables) charge(k rowKey) {
	switch k.kind {
	case model.EventDriver:
		t.use.set(k, driverCharge(t.Drivers[k.id]))
	case model.EventApp:
		a := t.Apps[k.id]
		var d *model.Driver
		if a != nil && a.DriverID != "" {
			d = t.Drivers[a.DriverID]
		}
		t.use.set(k, appCharge(a, d))
	case model.EventExecutor:
		e := t.Executors[k.id]
		ns := ""
		if e != nil {
			if a := t.Apps[e.AppID]; a != nil {
				ns = a.Namespace
			}
		}
		t.use.set(k, executorCharge(e, ns))
	}
}

// countUse rebuilds the use from every row, on Restore.
func (t *tables) countUse() {
	t.use = newNSUsage()
	for id := range t.Drivers {
		t.charge(rowKey{model.EventDriver, id})
	}
	for id := range t.Apps {
		t.charge(rowKey{model.EventApp, id})
	}
	for k := range t.Executors {
		t.charge(rowKey{model.EventExecutor, k})
	}
}

// namespace returns the settings of namespace name: its row, or
// ImplicitDefault for DefaultNamespace without one; nil for an unknown
// name.
func (t *tables) namespace(name string) *model.Namespace {
	name = model.NamespaceOf(name)
	if n, ok := t.Namespaces[name]; ok {
		return n
	}
	if name == model.DefaultNamespace {
		return model.ImplicitDefault()
	}
	return nil
}

// pending is what the entry being applied has added to each namespace's
// use so far, before recount charges it: placements and submissions
// earlier in the same entry count against the quota and queue bounds of
// later ones. Cleared at the end of every entry.
type pending map[string]*NamespaceUse

// pendingOf returns what the entry being applied added to ns's use.
func (t *tables) pendingOf(ns string) *NamespaceUse {
	if t.pending == nil {
		t.pending = pending{}
	}
	u := t.pending[ns]
	if u == nil {
		u = &NamespaceUse{}
		t.pending[ns] = u
	}
	return u
}

// useWith returns namespace ns's use with what the entry being applied
// added so far.
func (t *tables) useWith(ns string) NamespaceUse {
	var u NamespaceUse
	if cur := t.use.by[ns]; cur != nil {
		u.add(cur, 1)
	}
	if p := t.pending[ns]; p != nil {
		u.add(p, 1)
	}
	return u
}

// withinQuota reports whether namespace ns may place work of the given
// cores, memory (MiB), resources and drivers (1 for a driver, 0 for an
// executor) within its quota, and if so books it for the rest of the
// entry.
func (t *tables) withinQuota(ns string, cores int, memoryMB int64, res model.ResourceAmounts, drivers int) bool {
	ns = model.NamespaceOf(ns)
	n := t.namespace(ns)
	if n == nil {
		// A row of a namespace since deleted: deletion waits for its
		// live work, so only an old log's rows get here; they hold no
		// quota.
		return true
	}
	if n.Quota.Bounded() {
		u := t.useWith(ns)
		if ok, _, _, _ := u.Fits(n.Quota, cores, memoryMB, res, drivers); !ok {
			return false
		}
	}
	p := t.pendingOf(ns)
	p.add(&NamespaceUse{Cores: cores, MemoryMB: memoryMB, Resources: res, RunningDrivers: drivers}, 1)
	return true
}

// admitSubmission refuses a submission to namespace ns that does not
// exist, that asks for a priority above its PriorityMax, or that would pass
// its MaxQueuedDrivers, and otherwise books it for the rest of the entry.
func (t *tables) admitSubmission(ns string, priority *int) error {
	ns = model.NamespaceOf(ns)
	n := t.namespace(ns)
	if n == nil {
		return fmt.Errorf("%w: %s", model.ErrUnknownNamespace, ns)
	}
	if priority != nil && *priority > n.PriorityMax {
		return fmt.Errorf("%w: priority %d is above namespace %s's highest, %d", model.ErrInvalidCommand, *priority, ns, n.PriorityMax)
	}
	if n.MaxQueuedDrivers > 0 {
		if u := t.useWith(ns); u.Queued >= n.MaxQueuedDrivers {
			return fmt.Errorf("%w: namespace %s has %d drivers waiting, its --max-queued-drivers", model.ErrQueueFull, ns, n.MaxQueuedDrivers)
		}
	}
	t.pendingOf(ns).Queued++
	return nil
}

// applyNamespace applies c as the entry at index.
func (t *tables) applyNamespace(c *model.ApplyNamespace, index uint64) error {
	n := c.Namespace.Clone()
	if err := n.Validate(); err != nil {
		return fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	old, ok := t.Namespaces[n.Name]
	if !ok && len(t.Namespaces) >= model.MaxNamespaces {
		return fmt.Errorf("%w: the cluster has %d namespaces, at most %d", model.ErrInvalidCommand, len(t.Namespaces), model.MaxNamespaces)
	}
	n.CreatedAt = c.Time
	if ok {
		n.CreatedAt = old.CreatedAt
	}
	n.UpdatedAt, n.ModifyIndex = c.Time, index
	if t.Namespaces == nil {
		t.Namespaces = map[string]*model.Namespace{}
	}
	t.Namespaces[n.Name] = n
	return nil
}

func (t *tables) deleteNamespace(c *model.DeleteNamespace) error {
	if err := model.CheckNamespace(c.Name); err != nil {
		return fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	if _, ok := t.Namespaces[c.Name]; !ok {
		if c.Name == model.DefaultNamespace {
			return fmt.Errorf("%w: namespace %s always exists; it has no settings to delete", model.ErrInvalidCommand, c.Name)
		}
		return fmt.Errorf("%w: %s", model.ErrUnknownNamespace, c.Name)
	}
	if u := t.use.by[c.Name]; u != nil && (u.LiveDrivers > 0 || u.LiveApps > 0) {
		return fmt.Errorf("%w: namespace %s holds %d drivers and %d apps that have not ended", model.ErrNamespaceInUse, c.Name, u.LiveDrivers, u.LiveApps)
	}
	delete(t.Namespaces, c.Name)
	if c.Name == model.DefaultNamespace {
		return nil
	}
	for acc, tok := range t.ACLTokens {
		if tok.Grants(c.Name) {
			// Rows are shared with readers: the change is a copy.
			cp := tok.Clone()
			cp.Namespaces = slices.DeleteFunc(cp.Namespaces, func(ns string) bool { return ns == c.Name })
			t.ACLTokens[acc] = cp
		}
	}
	return nil
}

// createACLToken applies c as the entry at index.
func (t *tables) createACLToken(c *model.CreateACLToken, index uint64) error {
	tok := c.Token.Clone()
	if err := tok.Validate(); err != nil {
		return fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	for _, ns := range tok.Namespaces {
		if t.namespace(ns) == nil {
			return fmt.Errorf("%w: %s", model.ErrUnknownNamespace, ns)
		}
	}
	if _, ok := t.ACLTokens[tok.Accessor]; ok {
		return fmt.Errorf("%w: token %s", model.ErrDuplicateID, tok.Accessor)
	}
	if _, ok := t.tokenByHash[tok.SecretHash]; ok {
		return fmt.Errorf("%w: a token with that secret", model.ErrDuplicateID)
	}
	tok.CreatedAt, tok.ModifyIndex = c.Time, index
	if t.ACLTokens == nil {
		t.ACLTokens = map[string]*model.ACLToken{}
	}
	t.ACLTokens[tok.Accessor] = tok
	t.tokenByHash[tok.SecretHash] = tok.Accessor
	return nil
}

func (t *tables) revokeACLToken(c *model.RevokeACLToken) error {
	tok, ok := t.ACLTokens[c.Accessor]
	if !ok {
		return fmt.Errorf("%w: %s", model.ErrUnknownToken, c.Accessor)
	}
	delete(t.ACLTokens, c.Accessor)
	delete(t.tokenByHash, tok.SecretHash)
	return nil
}

// checkNamespaces checks a restored snapshot's namespaces and ACL tokens:
// rows under their own names, valid settings, tokens of known namespaces
// with secrets' hashes held once, and rebuilds the hash index.
func checkNamespaces(t *tables) error {
	for name, n := range t.Namespaces {
		if n == nil || n.Name != name {
			return fmt.Errorf("namespace row %q is inconsistent", name)
		}
		if err := n.Validate(); err != nil {
			return fmt.Errorf("namespace %s: %v", name, err)
		}
	}
	t.tokenByHash = map[string]string{}
	for acc, tok := range t.ACLTokens {
		if tok == nil || tok.Accessor != acc {
			return fmt.Errorf("ACL token row %q is inconsistent", acc)
		}
		// A token may name no namespace once its last was deleted.
		if len(tok.Namespaces) > 0 {
			if err := tok.Validate(); err != nil {
				return fmt.Errorf("ACL token %s: %v", acc, err)
			}
		}
		if _, dup := t.tokenByHash[tok.SecretHash]; dup {
			return fmt.Errorf("ACL token %s: its secret's hash is another token's", acc)
		}
		t.tokenByHash[tok.SecretHash] = acc
	}
	return nil
}

// Namespace returns namespace name's settings: its row (shared: do not
// change it), ImplicitDefault for DefaultNamespace without one, or false
// for an unknown name.
func (s *State) Namespace(name string) (*model.Namespace, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.t.namespace(name)
	return n, n != nil
}

// Namespaces returns every namespace, DefaultNamespace among them, by
// name; the rows are shared: do not change them.
func (s *State) Namespaces() []*model.Namespace {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := slices.Collect(maps.Values(s.t.Namespaces))
	if _, ok := s.t.Namespaces[model.DefaultNamespace]; !ok {
		out = append(out, model.ImplicitDefault())
	}
	slices.SortFunc(out, func(a, b *model.Namespace) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// NamespaceUse returns what namespace name's work holds now.
func (s *State) NamespaceUse(name string) NamespaceUse {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var u NamespaceUse
	if cur := s.t.use.by[model.NamespaceOf(name)]; cur != nil {
		u.add(cur, 1)
	}
	return u
}

// NamespaceUses returns every namespace's use that is not nothing, by
// name; copies.
func (s *State) NamespaceUses() map[string]NamespaceUse {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]NamespaceUse, len(s.t.use.by))
	for ns, cur := range s.t.use.by {
		var u NamespaceUse
		u.add(cur, 1)
		out[ns] = u
	}
	return out
}

// ACLTokenBySecretHash returns the ACL token whose secret has SHA-256
// hash (64 hex digits), as a view without the hash, or false.
func (s *State) ACLTokenBySecretHash(hash string) (*model.ACLToken, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	acc, ok := s.t.tokenByHash[hash]
	if !ok {
		return nil, false
	}
	return s.t.ACLTokens[acc].View(), true
}

// ACLTokens returns every ACL token, by accessor, as views without their
// hashes.
func (s *State) ACLTokens() []*model.ACLToken {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*model.ACLToken, 0, len(s.t.ACLTokens))
	for _, acc := range sortedKeys(s.t.ACLTokens) {
		out = append(out, s.t.ACLTokens[acc].View())
	}
	return out
}
