package workload

import (
	"context"
	"fmt"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
)

// Namespaces are what a run with namespaces applies before its faults
// start: three with quotas, each bound by another of its settings (etl
// by cores, ml by memory, two 64 MiB drivers of its three cores, adhoc by
// its running drivers), and urgent, of weight 2 with no quota, which
// preempts. Every driver share is 1: the workload's work is drivers only,
// so with the default share of a half they could never reach a quota.
// The clients' submissions spread over these and default.
func Namespaces() []model.Namespace {
	ns := func(name string, q model.Quota, weight float64, preempt bool) model.Namespace {
		return model.Namespace{Name: name, Quota: q, Weight: weight, DriverShare: 1, PriorityMax: model.MaxPriority, Preempt: preempt}
	}
	return []model.Namespace{
		ns("etl", model.Quota{Cores: 3}, 1, false),
		ns("ml", model.Quota{Cores: 3, MemoryMB: 160}, 1, false),
		ns("adhoc", model.Quota{RunningDrivers: 2}, 1, false),
		ns("urgent", model.Quota{}, 2, true),
	}
}

// ApplyNamespaces applies every namespace of nss through cl, in order.
// The client asks again after every answer without authority (no
// leader, a cut connection) until ctx ends, as the suite's other setup
// waits for its cluster; a refusal ends it at once.
func ApplyNamespaces(ctx context.Context, cl *client.Client, nss []model.Namespace) error {
	for _, n := range nss {
		if err := applyNamespace(ctx, cl, n); err != nil {
			return fmt.Errorf("namespace %s not applied: %w", n.Name, err)
		}
	}
	return nil
}

// applyNamespace applies n through the client's ApplyNamespace (PUT
// /v1/namespaces/{name}, operator access; a cluster without credentials
// lets every caller through). A bound of n that is zero is left out: it
// bounds nothing, as the masters' default.
func applyNamespace(ctx context.Context, cl *client.Client, n model.Namespace) error {
	set := func(v int) *int {
		if v == 0 {
			return nil
		}
		return &v
	}
	req := api.NamespaceRequest{
		Cores: set(n.Quota.Cores), Resources: n.Quota.Resources,
		MaxRunningDrivers: set(n.Quota.RunningDrivers), MaxQueuedDrivers: set(n.MaxQueuedDrivers),
		Weight: &n.Weight, DriverShare: &n.DriverShare, PriorityMax: &n.PriorityMax, Preempt: n.Preempt,
	}
	if n.Quota.MemoryMB > 0 {
		req.MemoryMB = &n.Quota.MemoryMB
	}
	_, err := cl.ApplyNamespace(ctx, n.Name, req)
	return err
}
