package workload

import (
	"context"
	"fmt"
	"net/http"

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

// namespaceRequest is the body of PUT /v1/namespaces/{name}: a field left
// out takes the masters' default.
type namespaceRequest struct {
	Cores             int                   `json:"cores,omitempty"`
	MemoryMB          int64                 `json:"memory_mb,omitempty"`
	Resources         model.ResourceAmounts `json:"resources,omitempty"`
	MaxRunningDrivers int                   `json:"max_running_drivers,omitempty"`
	MaxQueuedDrivers  int                   `json:"max_queued_drivers,omitempty"`
	Weight            float64               `json:"weight,omitempty"`
	DriverShare       float64               `json:"driver_share,omitempty"`
	PriorityMax       int                   `json:"priority_max,omitempty"`
	Preempt           bool                  `json:"preempt,omitempty"`
}

// applyNamespace applies n with one PUT /v1/namespaces/{name} (operator
// access; a cluster without credentials lets every caller through).
func applyNamespace(ctx context.Context, cl *client.Client, n model.Namespace) error {
	req := namespaceRequest{
		Cores: n.Quota.Cores, MemoryMB: n.Quota.MemoryMB, Resources: n.Quota.Resources,
		MaxRunningDrivers: n.Quota.RunningDrivers, MaxQueuedDrivers: n.MaxQueuedDrivers,
		Weight: n.Weight, DriverShare: n.DriverShare, PriorityMax: n.PriorityMax, Preempt: n.Preempt,
	}
	return cl.Do(ctx, http.MethodPut, "/v1/namespaces/"+n.Name, req, nil)
}
