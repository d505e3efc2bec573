package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/model"
)

// The namespace and token commands of drover operator (Nomad's
// `namespace` and `acl token` commands). Their flags are checked here as
// the masters check them, so that a typo is one line naming its flag,
// before any request.

func (k *cli) namespaceApply(ctx context.Context, args []string) int {
	fs := k.flags("namespace apply")
	cores := fs.Int("cores", 0, "cores the namespace's placed drivers and executors may hold together, at least 1 (default no quota)")
	mem := sizeFlag{max: maxSize >> 20}
	fs.Var(&mem, "memory", "memory they may hold together (512m, 64g; a bare number is MiB), at least 1m (default no quota)")
	resources := fs.StringArray("resource", nil, fmt.Sprintf("NAME=N: addresses of custom resource NAME they may hold together, N from 1 to %d (repeatable; default no quota)", model.MaxQuotaCount))
	running := fs.Int("max-running-drivers", 0, "drivers of the namespace placed at once, at least 1 (default no bound)")
	queued := fs.Int("max-queued-drivers", 0, "drivers of the namespace waiting for a placement; a submission past it is refused (429), at least 1 (default no bound)")
	weight := fs.Float64("weight", model.DefaultWeight, fmt.Sprintf("the namespace's weight in the fair share, above 0 and at most %g", float64(model.MaxWeight)))
	share := fs.Float64("driver-share", model.DefaultDriverShare, "the fraction of its quota (or fair share) its drivers may hold, above 0 and at most 1")
	prio := fs.Int("priority-max", model.MaxPriority, fmt.Sprintf("the highest priority its drivers may ask for, 0 to %d", model.MaxPriority))
	preempt := fs.Bool("preempt", false, "let the namespace take back its fair share from namespaces above theirs while its work waits")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	name, err := oneArg(fs, "NAME")
	if err != nil {
		return k.exitFor(err)
	}
	req, err := namespaceRequest(fs, *cores, mem.mb, *resources, *running, *queued, *weight, *share, *prio)
	if err != nil {
		return k.exitFor(err)
	}
	req.Preempt = *preempt
	if err := model.CheckNamespace(name); err != nil {
		return k.exitFor(err)
	}
	var st api.NamespaceStatus
	if err := k.call(ctx, func(ctx context.Context) (err error) { st, err = k.c.ApplyNamespace(ctx, name, req); return err }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "applied namespace %s\n", name)
	printNamespace(k.stdout, st)
	return 0
}

// namespaceRequest checks namespace apply's flags and makes the request
// of those given: each bound at least 1, the rest as the masters bound
// them. A flag left out is left out of the request, which gives it a
// new namespace's default.
func namespaceRequest(fs *pflag.FlagSet, cores int, memMB int64, resources []string, running, queued int, weight, share float64, prio int) (api.NamespaceRequest, error) {
	var req api.NamespaceRequest
	for _, b := range []struct {
		flag string
		v    int
		to   **int
	}{{"cores", cores, &req.Cores}, {"max-running-drivers", running, &req.MaxRunningDrivers}, {"max-queued-drivers", queued, &req.MaxQueuedDrivers}} {
		if !fs.Changed(b.flag) {
			continue
		}
		if b.v < 1 {
			return req, fmt.Errorf("--%s %d must be at least 1 (leave it out for no bound)", b.flag, b.v)
		}
		*b.to = &b.v
	}
	if fs.Changed("memory") {
		req.MemoryMB = &memMB
	}
	for _, r := range resources {
		if req.Resources == nil {
			req.Resources = model.ResourceAmounts{}
		}
		if err := model.ParseResourceQuota(req.Resources, r); err != nil {
			return req, fmt.Errorf("--resource: %v", err)
		}
	}
	switch {
	case math.IsNaN(weight) || weight < model.MinWeight || weight > model.MaxWeight:
		return req, fmt.Errorf("--weight %g must be at least %g and at most %g", weight, model.MinWeight, float64(model.MaxWeight))
	case math.IsNaN(share) || share <= 0 || share > 1:
		return req, fmt.Errorf("--driver-share %g must be above 0 and at most 1", share)
	case prio < 0 || prio > model.MaxPriority:
		return req, fmt.Errorf("--priority-max %d must be 0 to %d", prio, model.MaxPriority)
	}
	if fs.Changed("weight") {
		req.Weight = &weight
	}
	if fs.Changed("driver-share") {
		req.DriverShare = &share
	}
	if fs.Changed("priority-max") {
		req.PriorityMax = &prio
	}
	return req, nil
}

func (k *cli) namespaceList(ctx context.Context, args []string) int {
	fs := k.flags("namespace list")
	asJSON := fs.Bool("json", false, "print a JSON array of namespaces")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(fmt.Errorf("namespace list takes no arguments, got %q", fs.Args()))
	}
	var ns []api.NamespaceStatus
	if err := k.call(ctx, func(ctx context.Context) (err error) { ns, err = k.c.Namespaces(ctx); return err }); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(ns)
	}
	tw := tabwriter.NewWriter(k.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tQUOTA\tUSE\tQUEUED\tRUNNING\tWEIGHT\tDRIVER SHARE\tPRIORITY MAX\tPREEMPT")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%g\t%g\t%d\t%t\n", n.Name, quotaLine(n.Quota), useLine(n.Use), n.Queued, n.Running,
			n.Weight, n.DriverShare, n.PriorityMax, n.Preempt)
	}
	_ = tw.Flush()
	return 0
}

func (k *cli) namespaceStatus(ctx context.Context, args []string) int {
	fs := k.flags("namespace status")
	asJSON := fs.Bool("json", false, "print the namespace as one JSON object")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	name, err := oneArg(fs, "NAME")
	if err != nil {
		return k.exitFor(err)
	}
	var st api.NamespaceStatus
	if err := k.call(ctx, func(ctx context.Context) (err error) { st, err = k.c.Namespace(ctx, name); return err }); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(st)
	}
	printNamespace(k.stdout, st)
	return 0
}

func (k *cli) namespaceDelete(ctx context.Context, args []string) int {
	fs := k.flags("namespace delete")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	name, err := oneArg(fs, "NAME")
	if err != nil {
		return k.exitFor(err)
	}
	if err := k.call(ctx, func(ctx context.Context) error { _, err := k.c.DeleteNamespace(ctx, name); return err }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "deleted namespace %s\n", name)
	return 0
}

// printNamespace prints one namespace as namespace status shows it.
func printNamespace(w io.Writer, st api.NamespaceStatus) {
	fmt.Fprintf(w, "name:          %s\n", st.Name)
	fmt.Fprintf(w, "quota:         %s\n", quotaLine(st.Quota))
	fmt.Fprintf(w, "use:           %s\n", useLine(st.Use))
	fmt.Fprintf(w, "drivers use:   %s, %d MiB\n", plural.Count(st.Use.DriverCores, "core"), st.Use.DriverMemoryMB)
	fmt.Fprintf(w, "executors:     %d\n", st.Use.Executors)
	fmt.Fprintf(w, "queued:        %d", st.Queued)
	if st.MaxQueuedDrivers > 0 {
		fmt.Fprintf(w, " (at most %d)", st.MaxQueuedDrivers)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "running:       %d\n", st.Running)
	fmt.Fprintf(w, "live apps:     %d\n", st.LiveApps)
	fmt.Fprintf(w, "weight:        %g\n", st.Weight)
	fmt.Fprintf(w, "fair share:    %.3f\n", st.FairShare)
	fmt.Fprintf(w, "driver share:  %g\n", st.DriverShare)
	fmt.Fprintf(w, "priority max:  %d\n", st.PriorityMax)
	fmt.Fprintf(w, "preempt:       %t\n", st.Preempt)
	fmt.Fprintf(w, "preemptions:   %d suffered, %d caused\n", st.Preemptions, st.PreemptionsCaused)
}

// quotaLine is a quota in one line, "none" for none.
func quotaLine(q model.Quota) string {
	var parts []string
	if q.Cores > 0 {
		parts = append(parts, plural.Count(q.Cores, "core"))
	}
	if q.MemoryMB > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB", q.MemoryMB))
	}
	if len(q.Resources) > 0 {
		parts = append(parts, q.Resources.String())
	}
	if q.RunningDrivers > 0 {
		parts = append(parts, plural.Count(q.RunningDrivers, "running driver"))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// useLine is what a namespace's work holds, in one line.
func useLine(u api.NamespaceUse) string {
	s := fmt.Sprintf("%s, %d MiB", plural.Count(u.Cores, "core"), u.MemoryMB)
	if len(u.Resources) > 0 {
		s += ", " + u.Resources.String()
	}
	return s
}

func (k *cli) tokenCreate(ctx context.Context, args []string) int {
	fs := k.flags("token create")
	namespaces := fs.StringArray("namespace", nil, fmt.Sprintf("a namespace the token acts in (repeatable, 1 to %d)", model.MaxTokenNamespaces))
	policy := fs.String("policy", "", "submit (submit, kill, read) or read (list, status, logs, events) in its namespaces; required")
	name := fs.String("name", "", fmt.Sprintf("a name for the token in lists, at most %d bytes", model.MaxTokenNameLen))
	ttl := fs.Duration("ttl", 0, "how long the token lasts, 1s to 87600h (ten years); default for ever")
	asJSON := fs.Bool("json", false, `print {"accessor": ..., "secret": ...} and the rest as one JSON object`)
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(fmt.Errorf("token create takes no arguments, got %q", fs.Args()))
	}
	req := api.ACLTokenRequest{Namespaces: *namespaces, Policy: model.TokenPolicy(*policy), Name: *name, TTLMS: ttl.Milliseconds()}
	if err := checkTokenRequest(fs, req, *ttl); err != nil {
		return k.exitFor(err)
	}
	var tok api.ACLTokenCreated
	if err := k.call(ctx, func(ctx context.Context) (err error) { tok, err = k.c.CreateACLToken(ctx, req); return err }); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(tok)
	}
	fmt.Fprintf(k.stdout, "accessor:    %s\nsecret:      %s\npolicy:      %s\nnamespaces:  %s\nexpires:     %s\n",
		tok.Accessor, tok.Secret, tok.Policy, strings.Join(tok.Namespaces, ","), fmtTime(tok.ExpiresAt))
	fmt.Fprintln(k.stderr, "drover: the secret is shown this once; the masters keep only its hash")
	return 0
}

// checkTokenRequest checks token create's flags as the masters check the
// request.
func checkTokenRequest(fs *pflag.FlagSet, req api.ACLTokenRequest, ttl time.Duration) error {
	if len(req.Namespaces) == 0 {
		return errors.New("token create needs --namespace")
	}
	if err := req.Policy.Check(); err != nil {
		return fmt.Errorf("--policy: %v", err)
	}
	if fs.Changed("ttl") && (req.TTLMS < api.MinTokenTTL || req.TTLMS > api.MaxTokenTTL) {
		return fmt.Errorf("--ttl %s must be from 1s to %s", ttl, time.Duration(api.MaxTokenTTL)*time.Millisecond)
	}
	tok := model.ACLToken{Accessor: "-", SecretHash: strings.Repeat("0", 64), Name: req.Name, Policy: req.Policy, Namespaces: req.Namespaces}
	return tok.Validate()
}

func (k *cli) tokenList(ctx context.Context, args []string) int {
	fs := k.flags("token list")
	asJSON := fs.Bool("json", false, "print a JSON array of tokens (never their secrets)")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(fmt.Errorf("token list takes no arguments, got %q", fs.Args()))
	}
	var toks []*model.ACLToken
	if err := k.call(ctx, func(ctx context.Context) (err error) { toks, err = k.c.ACLTokens(ctx); return err }); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(toks)
	}
	tw := tabwriter.NewWriter(k.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCESSOR\tNAME\tPOLICY\tNAMESPACES\tCREATED\tEXPIRES")
	for _, t := range toks {
		// Deleting a namespace strips it from the tokens: one left with
		// none grants nothing, and says so rather than leave a blank.
		ns := cmp.Or(strings.Join(t.Namespaces, ","), "(none)")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Accessor, t.Name, t.Policy, ns, fmtTime(t.CreatedAt), fmtTime(t.ExpiresAt))
	}
	_ = tw.Flush()
	return 0
}

func (k *cli) tokenRevoke(ctx context.Context, args []string) int {
	fs := k.flags("token revoke")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	acc, err := oneArg(fs, "ACCESSOR")
	if err != nil {
		return k.exitFor(err)
	}
	if err := k.call(ctx, func(ctx context.Context) error { _, err := k.c.RevokeACLToken(ctx, acc); return err }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "revoked %s\n", acc)
	return 0
}
