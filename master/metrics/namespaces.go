package metrics

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// The namespaces' metrics, computed at each scrape from the tables like
// the other table gauges, so that every master that has applied the same
// index reports the same figures. Every namespace is a label value,
// `default` included: at most model.MaxNamespaces applied ones and the
// implicit default, each with 12 to 16 series and one more per custom
// resource its quota or use names (at most model.MaxResourceNames each),
// so the cardinality is bounded by what the tables may hold. A quota that bounds nothing is absent rather than a
// sentinel: used / quota then answers for the bounded namespaces only,
// and no sum over namespaces adds an infinity or a -1.
var (
	descNSWeight = prometheus.NewDesc("drover_namespace_weight",
		"Weight of the namespace in the weighted dominant-resource fair share (--weight).", []string{"namespace"}, nil)
	descNSQuotaCores = prometheus.NewDesc("drover_namespace_quota_cores",
		"Cores the namespace's placed drivers and live executors may hold together (--cores); absent when unbounded.",
		[]string{"namespace"}, nil)
	descNSQuotaMemory = prometheus.NewDesc("drover_namespace_quota_memory_bytes",
		"Memory the namespace's placed drivers and live executors may hold together (--memory), in bytes; absent when unbounded.",
		[]string{"namespace"}, nil)
	descNSQuotaResources = prometheus.NewDesc("drover_namespace_quota_resources",
		"Units of each custom resource the namespace's work may hold (--resource NAME=N); absent for a resource it does not bound.",
		[]string{"namespace", "resource"}, nil)
	descNSQuotaDrivers = prometheus.NewDesc("drover_namespace_quota_running_drivers",
		"Drivers of the namespace that may be placed at once (--max-running-drivers); absent when unbounded.",
		[]string{"namespace"}, nil)
	descNSCores = prometheus.NewDesc("drover_namespace_used_cores",
		"Cores the namespace's placed drivers and live executors hold.", []string{"namespace"}, nil)
	descNSMemory = prometheus.NewDesc("drover_namespace_used_memory_bytes",
		"Memory the namespace's placed drivers and live executors hold, in bytes.", []string{"namespace"}, nil)
	descNSResources = prometheus.NewDesc("drover_namespace_used_resources",
		"Units of each custom resource the namespace's placed drivers and live executors hold; a resource held by none is absent.",
		[]string{"namespace", "resource"}, nil)
	descNSDriverCores = prometheus.NewDesc("drover_namespace_driver_used_cores",
		"Cores the namespace's placed drivers alone hold: what its driver share (--driver-share) bounds.", []string{"namespace"}, nil)
	descNSDriverMemory = prometheus.NewDesc("drover_namespace_driver_used_memory_bytes",
		"Memory the namespace's placed drivers alone hold, in bytes.", []string{"namespace"}, nil)
	descNSRunning = prometheus.NewDesc("drover_namespace_running_drivers",
		"Drivers of the namespace placed on a worker (staging or running).", []string{"namespace"}, nil)
	descNSQueued = prometheus.NewDesc("drover_namespace_queued_drivers",
		"Drivers of the namespace waiting for a placement (waitingDrivers), relaunches included.", []string{"namespace"}, nil)
	descNSExecutors = prometheus.NewDesc("drover_namespace_executors",
		"Live executors of the namespace's applications.", []string{"namespace"}, nil)
	descNSDominant = prometheus.NewDesc("drover_namespace_dominant_share_ratio",
		"The namespace's dominant share: the largest fraction of any one resource of the ALIVE workers (cores, memory, a custom resource) its work holds; above 1 when it holds more than the cluster now offers.",
		[]string{"namespace"}, nil)
	descNSPreemptions = prometheus.NewDesc("drover_namespace_preemptions_total",
		"Driver attempts and executors preempted since the log began: the namespace's own, taken back for others (side=suffered), and others', taken back for it (side=caused); counted in the tables, so every master reports the same and a change of leader loses none.",
		[]string{"namespace", "side"}, nil)
	descNSFair = prometheus.NewDesc("drover_namespace_fair_share_ratio",
		"The namespace's fair share of the cluster, 0 to 1: weighted max-min over what each namespace holds and waits for, within its quota; 0 for a namespace with nothing held or waiting.",
		[]string{"namespace"}, nil)
)

// namespaceDescs lists the descriptions namespaceCollector reports.
var namespaceDescs = []*prometheus.Desc{descNSWeight, descNSQuotaCores, descNSQuotaMemory, descNSQuotaResources,
	descNSQuotaDrivers, descNSCores, descNSMemory, descNSResources, descNSDriverCores, descNSDriverMemory,
	descNSRunning, descNSQueued, descNSExecutors, descNSDominant, descNSFair, descNSPreemptions}

// namespaceCollector computes, on each scrape, every namespace's quota,
// use, shares and preemptions from the tables st.
type namespaceCollector struct{ st *fsm.State }

// Describe implements prometheus.Collector.
func (c namespaceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range namespaceDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The use and the shares come
// from master/fairshare's Inputs and Compute, the figures the scheduler
// and `namespace status` work with.
func (c namespaceCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	capacity, nss := fairshare.Inputs(c.st)
	shares := fairshare.Compute(capacity, nss)
	uses := c.st.NamespaceUses()
	for _, n := range nss {
		name, q, u := n.Settings.Name, n.Settings.Quota, uses[n.Settings.Name]
		gauge(descNSWeight, n.Settings.Weight, name)
		if q.Cores > 0 {
			gauge(descNSQuotaCores, float64(q.Cores), name)
		}
		if q.MemoryMB > 0 {
			gauge(descNSQuotaMemory, float64(q.MemoryMB<<20), name)
		}
		resources(ch, descNSQuotaResources, name, q.Resources)
		if q.RunningDrivers > 0 {
			gauge(descNSQuotaDrivers, float64(q.RunningDrivers), name)
		}
		gauge(descNSCores, float64(u.Cores), name)
		gauge(descNSMemory, float64(u.MemoryMB<<20), name)
		resources(ch, descNSResources, name, u.Resources)
		gauge(descNSDriverCores, float64(u.DriverCores), name)
		gauge(descNSDriverMemory, float64(u.DriverMemoryMB<<20), name)
		gauge(descNSRunning, float64(u.RunningDrivers), name)
		gauge(descNSQueued, float64(u.Queued), name)
		gauge(descNSExecutors, float64(u.Executors), name)
		s := shares[name]
		gauge(descNSDominant, s.Dominant, name)
		gauge(descNSFair, s.Fair, name)
		p := c.st.Preemptions(name)
		ch <- prometheus.MustNewConstMetric(descNSPreemptions, prometheus.CounterValue, float64(p.Suffered), name, "suffered")
		ch <- prometheus.MustNewConstMetric(descNSPreemptions, prometheus.CounterValue, float64(p.Caused), name, "caused")
	}
}

// resources reports one series of d for each custom resource of amounts,
// in name order.
func resources(ch chan<- prometheus.Metric, d *prometheus.Desc, namespace string, amounts model.ResourceAmounts) {
	for _, k := range slices.Sorted(maps.Keys(amounts)) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(amounts[k]), namespace, k)
	}
}
