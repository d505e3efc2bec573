package fsm

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"

	"github.com/drover-project/drover/model"
)

// The interner's bounds: each of its caches keeps at most this many
// values, or values of this many bytes, per generation (it holds two).
const (
	internEntries = 4096
	internBytes   = 1 << 20
)

// interner makes the rows share one copy of equal strings, argvs and
// environments. Drivers submitted by the same job, or by the same
// spark-submit, mostly carry the same program: the same argv elements, the
// same environment, often the same argv and name. Decoded from their own
// entries, each row would hold its own copy of them, and at 100,000
// drivers the copies were a third of a master's heap (the environment map
// alone some 330 bytes a row).
//
// Sharing is safe because Apply never changes a row's program in place
// (see cloneDriver), and what callers get is documented as not to be
// changed (the FSM's readers, Assignments). Interning changes no
// value, only where it is kept: which values the caches hold and when
// they forget them has no effect on the tables, so masters whose caches
// differ (one restarted from a snapshot, one that applied the log) still
// hold equal tables. For the same reason argvs and environments are
// cached under a hash of their contents with a seed of this process's
// own: a value found under its hash is compared with the one looked up,
// and two that collide are simply not shared.
//
// Each cache is bounded: a generation that is full is set aside as the
// old one, the older one dropped, and a value found in the old
// generation moves back to the new. Values still in use stay cached; one
// that is used once costs its place until two generations have passed.
// Not safe for concurrent use: Apply and Restore use it under the FSM's
// write lock, or before the tables are installed.
type interner struct {
	seed   maphash.Seed
	seeded bool
	strs   internCache[string, string]
	argvs  internCache[uint64, []string]
	envs   internCache[uint64, map[string]string]
}

// internCache maps a key to the canonical value, in two generations.
type internCache[K comparable, V any] struct {
	cur, old map[K]V
	// bytes is roughly what the values of cur hold.
	bytes int
}

// get returns the value cached under key, moving it to the current
// generation when it was in the old one; size is roughly what the value
// holds, in bytes.
func (c *internCache[K, V]) get(key K, size int) (V, bool) {
	if v, ok := c.cur[key]; ok {
		return v, true
	}
	if v, ok := c.old[key]; ok {
		c.put(key, v, size)
		return v, true
	}
	var zero V
	return zero, false
}

// put caches v under key; size is roughly what v holds, in bytes.
func (c *internCache[K, V]) put(key K, v V, size int) {
	if c.cur == nil || len(c.cur) >= internEntries || c.bytes+size > internBytes {
		c.old, c.cur, c.bytes = c.cur, make(map[K]V), 0
	}
	c.cur[key] = v
	c.bytes += size
}

// hashSeed returns the seed of the hashes of argvs and environments.
func (in *interner) hashSeed() maphash.Seed {
	if !in.seeded {
		in.seed, in.seeded = maphash.MakeSeed(), true
	}
	return in.seed
}

// str returns the canonical copy of s.
func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in.strs.get(s, len(s)); ok {
		return v
	}
	// A copy of its own, so that a string cut from a larger buffer by a
	// decoder does not keep that buffer alive.
	s = strings.Clone(s)
	in.strs.put(s, s, len(s))
	return s
}

// argv returns the canonical copy of argv, whose elements are canonical
// too. Empty and nil argvs are returned as they are. It takes argv over:
// when no copy is known, argv becomes the canonical one, its elements
// replaced by their canonical copies, so the caller must hold the only
// reference to it (a decoded command's or row's).
func (in *interner) argv(argv []string) []string {
	if len(argv) == 0 {
		return argv
	}
	var h maphash.Hash
	h.SetSeed(in.hashSeed())
	size := 0
	for _, s := range argv {
		h.WriteString(s)
		h.WriteByte(0)
		size += len(s)
	}
	key := h.Sum64()
	if v, ok := in.argvs.get(key, size); ok && slices.Equal(v, argv) {
		return v
	}
	for i, s := range argv {
		argv[i] = in.str(s)
	}
	in.argvs.put(key, argv, size)
	return argv
}

// env returns the canonical copy of env, whose keys and values are
// canonical too. Empty and nil maps are returned as they are.
func (in *interner) env(env map[string]string) map[string]string {
	if len(env) == 0 {
		return env
	}
	seed := in.hashSeed()
	// A sum of the entries' hashes, which does not depend on the order
	// the map yields them in.
	var key uint64
	size := 0
	for k, v := range env {
		key += maphash.String(seed, k)*31 + maphash.String(seed, v)
		size += len(k) + len(v)
	}
	if v, ok := in.envs.get(key, size); ok && maps.Equal(v, env) {
		return v
	}
	v := make(map[string]string, len(env))
	for k, val := range env {
		v[in.str(k)] = in.str(val)
	}
	in.envs.put(key, v, size)
	return v
}

// driverStates are the known driver states, whose names rows share.
var driverStates = model.DriverStates()

// driverState returns the constant of a known driver state, so that rows
// do not each hold a decoded copy of its name; an unknown one as it is.
func driverState(s model.DriverState) model.DriverState {
	if i := slices.Index(driverStates, s); i >= 0 {
		return driverStates[i]
	}
	return s
}

// shareDriver makes a driver row decoded from a snapshot share its
// strings, argv and environment through in, as the rows Apply makes do,
// and its workers' IDs with the rows of workers, which it only reads.
func (in *interner) shareDriver(d *model.Driver, workers map[string]*model.Worker) {
	worker := func(id string) string {
		if w, ok := workers[id]; ok {
			return w.ID
		}
		return in.str(id)
	}
	d.Name = in.str(d.Name)
	d.User = in.str(d.User)
	d.Argv = in.argv(d.Argv)
	d.Env = in.env(d.Env)
	d.State = driverState(d.State)
	d.WorkerID = worker(d.WorkerID)
	d.Message = in.str(d.Message)
	for i := range d.Attempts {
		a := &d.Attempts[i]
		a.WorkerID = worker(a.WorkerID)
		a.State = driverState(a.State)
		a.Reason = in.str(a.Reason)
	}
}

// shareIDs makes the waiting queue and the token index of tables decoded
// from a snapshot name the driver rows' own ID and token strings rather
// than decoded copies of them. Called on tables checkTables accepted.
func (t *tables) shareIDs() {
	for i, id := range t.WaitingDrivers {
		t.WaitingDrivers[i] = t.Drivers[id].ID
	}
	for tok, id := range t.Tokens {
		d := t.Drivers[id]
		t.Tokens[tok] = d.ID
		d.Token = tok // checkTables made them equal
	}
}
