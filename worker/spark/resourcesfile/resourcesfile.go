// Package resourcesfile reads and writes Spark's resources file, the JSON list
// of allocated resource addresses that Spark's standalone worker reads
// with spark.worker.resourcesFile and its drivers and executors with
// spark.driver.resourcesFile and --resourcesFile (Spark's
// ResourceUtils.parseAllocatedFromJsonFile over ResourceAllocation):
//
//	[{"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": ["0", "1"]}]
//
// A worker reads its offer from one (drover worker --resources-file); the
// worker writes one into each unit directory naming the addresses the
// unit holds, for the program ($DROVER_RESOURCES_FILE).
package resourcesfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// The component names of Spark's ResourceID that Drover reads or writes.
const (
	Worker   = "spark.worker"
	Driver   = "spark.driver"
	Executor = "spark.executor"
)

// MaxFileBytes bounds a resources file a worker reads.
const MaxFileBytes = 1 << 20

// allocation is Spark's ResourceAllocation in JSON.
type allocation struct {
	ID        resourceID `json:"id"`
	Addresses []string   `json:"addresses"`
}

// resourceID is Spark's ResourceID in JSON.
type resourceID struct {
	ComponentName string `json:"componentName"`
	ResourceName  string `json:"resourceName"`
}

// Parse reads the resources of component from a resources file's bytes.
// As Spark's parseAllocated does, entries of other components are
// skipped; unknown fields, a resource named twice for component, an
// offer model.CheckResourceOffer refuses, and a file with no entry for
// component are errors of one line.
func Parse(data []byte, component string) (model.Resources, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("resources file of %d bytes, at most %d", len(data), MaxFileBytes)
	}
	var all []allocation
	if err := strictjson.Decode(bytes.NewReader(data), &all); err != nil {
		return nil, fmt.Errorf("not a Spark resources file (a JSON list of {\"id\": {\"componentName\", \"resourceName\"}, \"addresses\"}): %v", err)
	}
	out := model.Resources{}
	for _, a := range all {
		if a.ID.ComponentName != component {
			continue
		}
		if _, dup := out[a.ID.ResourceName]; dup {
			return nil, fmt.Errorf("resource %s is listed twice for %s", a.ID.ResourceName, component)
		}
		out[a.ID.ResourceName] = a.Addresses
		if err := model.CheckResourceOffer(model.Resources{a.ID.ResourceName: a.Addresses}); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no resource of %s in the file", component)
	}
	return out, model.CheckResourceOffer(out)
}

// Encode writes r as a resources file of component, resources in name
// order, as Spark's StandaloneResourceUtils.prepareResourcesFile writes
// one for a driver or an executor.
func Encode(component string, r model.Resources) ([]byte, error) {
	all := make([]allocation, 0, len(r))
	for _, name := range slices.Sorted(maps.Keys(r)) {
		all = append(all, allocation{ID: resourceID{ComponentName: component, ResourceName: name}, Addresses: r[name]})
	}
	return json.Marshal(all)
}
