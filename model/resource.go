package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Custom resources, as Spark 3 schedules them (spark.worker.resource.*,
// spark.driver.resource.{name}.amount) and as Nomad's device plugins offer
// them: a worker offers named resources, each a list of addresses (GPU
// indexes, say); a driver attempt or an executor asks for an amount of some
// of them and holds that many addresses of its worker, which no other live
// attempt or executor holds at the same time.

// Resources maps a resource name to addresses (Spark's
// ResourceInformation): what a worker offers, or what an attempt or an
// executor holds. Address lists keep the order they were given in.
type Resources map[string][]string

// ResourceAmounts maps a resource name to how many of its addresses a
// driver attempt or an executor needs (Spark's ResourceRequest amount).
type ResourceAmounts map[string]int

// Bounds of custom resources, so that a worker's row, a placement entry
// and a program's environment stay small.
const (
	// MaxResourceNames bounds the names a worker offers or a request
	// names.
	MaxResourceNames = 32
	// MaxResourceAddresses bounds the addresses of one name.
	MaxResourceAddresses = 1024
	// maxResourceName and maxAddress bound a name's and an address's
	// bytes.
	maxResourceName = 64
	maxAddress      = 64
)

// CheckResourceName checks a resource name: a lowercase letter, then
// lowercase letters, digits or underscores, at most 64 bytes. Lowercase
// only, since the program's variable is DROVER_RESOURCE_ and the name
// upper-cased: "gpu" and "GPU" must not be two resources with one
// variable. The error is one line and wraps no sentinel.
func CheckResourceName(name string) error {
	ok := name != "" && len(name) <= maxResourceName && name[0] >= 'a' && name[0] <= 'z'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if !ok {
		return fmt.Errorf("resource name %q is not a lowercase letter followed by lowercase letters, digits or _ (at most %d bytes)", name, maxResourceName)
	}
	return nil
}

// checkAddress checks one address: printable ASCII without spaces or
// commas (the program's variable lists them with commas), at most 64
// bytes.
func checkAddress(name, a string) error {
	ok := a != "" && len(a) <= maxAddress
	for i := 0; ok && i < len(a); i++ {
		ok = a[i] > ' ' && a[i] < 0x7f && a[i] != ','
	}
	if !ok {
		return fmt.Errorf("resource %s: address %q is not 1 to %d printable characters without spaces or commas", name, a, maxAddress)
	}
	return nil
}

// CheckResourceOffer checks what a worker offers: at most MaxResourceNames
// valid names, each with 1 to MaxResourceAddresses addresses, none named
// twice. The error is one line and wraps no sentinel.
func CheckResourceOffer(r Resources) error {
	if len(r) > MaxResourceNames {
		return fmt.Errorf("%d resource names, at most %d", len(r), MaxResourceNames)
	}
	for _, name := range slices.Sorted(maps.Keys(r)) {
		if err := CheckResourceName(name); err != nil {
			return err
		}
		addrs := r[name]
		switch {
		case len(addrs) == 0:
			return fmt.Errorf("resource %s has no addresses", name)
		case len(addrs) > MaxResourceAddresses:
			return fmt.Errorf("resource %s has %d addresses, at most %d", name, len(addrs), MaxResourceAddresses)
		}
		seen := make(map[string]bool, len(addrs))
		for _, a := range addrs {
			if err := checkAddress(name, a); err != nil {
				return err
			}
			if seen[a] {
				return fmt.Errorf("resource %s: address %q is given twice", name, a)
			}
			seen[a] = true
		}
	}
	return nil
}

// CheckResourceAmounts checks a request: at most MaxResourceNames valid
// names, each with an amount from 1 to MaxResourceAddresses. The error is
// one line and wraps no sentinel.
func CheckResourceAmounts(r ResourceAmounts) error {
	return checkAmounts(r, MaxResourceAddresses)
}

// checkAmounts checks at most MaxResourceNames valid names, each with an
// amount from 1 to most.
func checkAmounts(r ResourceAmounts, most int) error {
	if len(r) > MaxResourceNames {
		return fmt.Errorf("%d resource names, at most %d", len(r), MaxResourceNames)
	}
	for _, name := range slices.Sorted(maps.Keys(r)) {
		if err := CheckResourceName(name); err != nil {
			return err
		}
		if n := r[name]; n < 1 || n > most {
			return fmt.Errorf("resource %s: amount %d is not from 1 to %d", name, n, most)
		}
	}
	return nil
}

// ParseResourceOffer parses one --resource flag, NAME=ADDR,ADDR,... (a
// worker's spark.worker.resource.NAME with its addresses), into r, which
// must not have NAME yet. The result is checked as CheckResourceOffer
// checks it.
func ParseResourceOffer(r Resources, s string) error {
	name, list, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not NAME=ADDRESS,ADDRESS (a list with commas)", s)
	}
	if _, dup := r[name]; dup {
		return fmt.Errorf("resource %s is offered twice", name)
	}
	var addrs []string
	if list != "" {
		addrs = strings.Split(list, ",")
	}
	one := Resources{name: addrs}
	if err := CheckResourceOffer(one); err != nil {
		return err
	}
	r[name] = addrs
	return nil
}

// ParseResourceAmount parses one --driver-resource flag, NAME=AMOUNT, into
// r, which must not have NAME yet. The result is checked as
// CheckResourceAmounts checks it.
func ParseResourceAmount(r ResourceAmounts, s string) error {
	return parseAmount(r, s, MaxResourceAddresses)
}

// ParseResourceQuota parses one NAME=AMOUNT of a namespace's resource
// quota into r, as ParseResourceAmount does, with an amount from 1 to
// MaxQuotaCount: a quota spans workers.
func ParseResourceQuota(r ResourceAmounts, s string) error {
	return parseAmount(r, s, MaxQuotaCount)
}

// parseAmount parses NAME=AMOUNT into r, an amount from 1 to most.
func parseAmount(r ResourceAmounts, s string, most int) error {
	name, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not NAME=AMOUNT", s)
	}
	if _, dup := r[name]; dup {
		return fmt.Errorf("resource %s is asked for twice", name)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("resource %s: amount %q is not a whole number", name, v)
	}
	one := ResourceAmounts{name: n}
	if err := checkAmounts(one, most); err != nil {
		return err
	}
	r[name] = n
	return nil
}

// ResourceEnv is the name of the variable that gives a program the
// addresses it holds of resource name: DROVER_RESOURCE_ and the name
// upper-cased (DROVER_RESOURCE_GPU).
func ResourceEnv(name string) string { return "DROVER_RESOURCE_" + strings.ToUpper(name) }

// Clone returns a deep copy of r; nil for nil.
func (r Resources) Clone() Resources {
	if r == nil {
		return nil
	}
	out := make(Resources, len(r))
	for k, v := range r {
		out[k] = slices.Clone(v)
	}
	return out
}

// Counts returns how many addresses r has of each name.
func (r Resources) Counts() ResourceAmounts {
	out := make(ResourceAmounts, len(r))
	for k, v := range r {
		out[k] = len(v)
	}
	return out
}

// Free returns the addresses of offer that held does not hold, of each
// name, in offer's order.
func Free(offer, held Resources) Resources {
	out := make(Resources, len(offer))
	for name, addrs := range offer {
		for _, a := range addrs {
			if !slices.Contains(held[name], a) {
				out[name] = append(out[name], a)
			}
		}
	}
	return out
}

// Fits reports whether have has at least the amounts want asks for.
func (want ResourceAmounts) Fits(have ResourceAmounts) bool {
	for name, n := range want {
		if have[name] < n {
			return false
		}
	}
	return true
}

// Pick returns the addresses a placement of want takes from free: the
// first ones of each name, in free's order; false when free has too few.
func (want ResourceAmounts) Pick(free Resources) (Resources, bool) {
	if len(want) == 0 {
		return nil, true
	}
	out := make(Resources, len(want))
	for name, n := range want {
		if len(free[name]) < n {
			return nil, false
		}
		out[name] = slices.Clone(free[name][:n])
	}
	return out, true
}

// String writes amounts as NAME=N pairs in name order, "gpu=1 fpga=2"
// style but sorted ("fpga=2 gpu=1").
func (want ResourceAmounts) String() string {
	parts := make([]string, 0, len(want))
	for _, name := range slices.Sorted(maps.Keys(want)) {
		parts = append(parts, name+"="+strconv.Itoa(want[name]))
	}
	return strings.Join(parts, " ")
}

// String writes r as NAME=ADDR,ADDR pairs in name order.
func (r Resources) String() string {
	parts := make([]string, 0, len(r))
	for _, name := range slices.Sorted(maps.Keys(r)) {
		parts = append(parts, name+"="+strings.Join(r[name], ","))
	}
	return strings.Join(parts, " ")
}

// CheckHolding checks that held, the addresses a placement gives a unit
// that asks for want, names exactly want's names with exactly as many
// distinct addresses each, every one of them in free. The error is one
// line and wraps no sentinel.
func CheckHolding(want ResourceAmounts, held, free Resources) error {
	for name := range held {
		if _, ok := want[name]; !ok {
			return fmt.Errorf("holds resource %s it did not ask for", name)
		}
	}
	for name, n := range want {
		addrs := held[name]
		if len(addrs) != n {
			return fmt.Errorf("holds %d addresses of %s, asked for %d", len(addrs), name, n)
		}
		for i, a := range addrs {
			if !slices.Contains(free[name], a) || slices.Contains(addrs[:i], a) {
				return fmt.Errorf("address %s of %s is not free on the worker", a, name)
			}
		}
	}
	return nil
}

// Hold adds addrs to used, keeping each list sorted so that two masters
// that reached the same holdings by different paths (a restore rebuilds
// them) hold equal rows.
func (used *Resources) Hold(addrs Resources) {
	if len(addrs) == 0 {
		return
	}
	if *used == nil {
		*used = Resources{}
	}
	for name, as := range addrs {
		l := append((*used)[name], as...)
		slices.Sort(l)
		(*used)[name] = l
	}
}

// Release takes addrs out of used, dropping names left with none.
func (used *Resources) Release(addrs Resources) {
	for name, as := range addrs {
		l := (*used)[name]
		for _, a := range as {
			if i := slices.Index(l, a); i >= 0 {
				l = slices.Delete(l, i, i+1)
			}
		}
		if len(l) == 0 {
			delete(*used, name)
		} else {
			(*used)[name] = l
		}
	}
	if len(*used) == 0 {
		*used = nil
	}
}
