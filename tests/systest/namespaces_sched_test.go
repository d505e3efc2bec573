package systest

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestNamespacesShareCoresByWeight: two namespaces of weights 1 and 3
// flood a cluster of four 4-core workers with 3-second drivers; once the
// first running drivers have ended, the cores their drivers hold settle
// at 1:3 (light's part 0.25, within 10 % of it, averaged over samples
// taken every 100 ms for 4 s while both still have drivers waiting).
func TestNamespacesShareCoresByWeight(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for name, weight := range map[string]float64{"light": 1, "heavy": 3} {
		// A driver share of 1: the drivers are the work here.
		one := 1.0
		if _, err := cl.ApplyNamespace(ctx, name, api.NamespaceRequest{Weight: &weight, DriverShare: &one}); err != nil {
			t.Fatalf("apply namespace %s: %v", name, err)
		}
	}
	// Enough of each to keep both waiting through the samples: heavy
	// runs 12 at a time, light 4.
	for i := range 90 {
		ns := "heavy"
		if i%3 == 0 {
			ns = "light"
		}
		submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{
			Argv: []string{"/bin/sh", "-c", "sleep 3"}, Cores: 1, MemoryMB: 64, Namespace: ns,
		}})
	}
	for i := range 4 {
		c.AddWorker(fmt.Sprintf("w%d", i+1))
	}
	// held returns the cores of light's and heavy's placed drivers, and
	// how many drivers have finished.
	held := func() (light, heavy, finished int) {
		for _, d := range listDrivers(t, ctx, cl) {
			switch {
			case d.State == model.DriverFinished:
				finished++
			case d.WorkerID == "" || d.State.Terminal():
			case d.Namespace == "light":
				light += d.Cores
			case d.Namespace == "heavy":
				heavy += d.Cores
			}
		}
		return light, heavy, finished
	}
	waitFor(t, time.Minute, "the first wave of drivers finished", func() bool { _, _, f := held(); return f >= 16 })
	var sum float64
	samples := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); samples++ {
		light, heavy, _ := held()
		if light+heavy > 0 {
			sum += float64(light) / float64(light+heavy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	light, heavy, finished := held()
	part := sum / float64(samples)
	t.Logf("light's part of the held cores %.3f over %d samples; at the end light %d cores, heavy %d, %d finished", part, samples, light, heavy, finished)
	if math.Abs(part-0.25) > 0.025 {
		t.Fatalf("light held %.3f of the cores on average, want 0.25 within 10 %%", part)
	}
	if heavy == 0 {
		t.Fatal("heavy ran out of waiting drivers before the samples ended: the test measured nothing")
	}
}
