package resourcesfile

import (
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

// A worker's resources file as Spark writes one, with a driver's entry
// beside it, which a worker skips as Spark's does.
const workerFile = `[
  {"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": ["0", "1", "2", "3"]},
  {"id": {"componentName": "spark.worker", "resourceName": "fpga"}, "addresses": ["f0"]},
  {"id": {"componentName": "spark.driver", "resourceName": "gpu"}, "addresses": ["9"]}
]`

func TestParse(t *testing.T) {
	r, err := Parse([]byte(workerFile), Worker)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.String(); got != "fpga=f0 gpu=0,1,2,3" {
		t.Fatalf("parsed %q", got)
	}
	for _, bad := range []struct{ in, want string }{
		{`{"id": {}}`, "not a Spark resources file"},
		{`[{"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": ["0"], "extra": 1}]`, "unknown field"},
		{`[{"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": ["0"]},
		   {"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": ["1"]}]`, "listed twice"},
		{`[{"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": []}]`, "no addresses"},
		{`[{"id": {"componentName": "spark.worker", "resourceName": "gpu"}, "addresses": ["0", "0"]}]`, "given twice"},
		{`[{"id": {"componentName": "spark.worker", "resourceName": "GPU"}, "addresses": ["0"]}]`, "resource name"},
		{`[{"id": {"componentName": "spark.driver", "resourceName": "gpu"}, "addresses": ["0"]}]`, "no resource of spark.worker"},
		{`[]`, "no resource of spark.worker"},
	} {
		if _, err := Parse([]byte(bad.in), Worker); err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one line with %q", bad.in, err, bad.want)
		}
	}
}

func TestEncodeIsWhatSparkReads(t *testing.T) {
	b, err := Encode(Driver, model.Resources{"gpu": {"1", "0"}, "fpga": {"a"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":{"componentName":"spark.driver","resourceName":"fpga"},"addresses":["a"]},{"id":{"componentName":"spark.driver","resourceName":"gpu"},"addresses":["1","0"]}]`
	if string(b) != want {
		t.Fatalf("encoded %s\nwant    %s", b, want)
	}
	back, err := Parse(b, Driver)
	if err != nil || back.String() != "fpga=a gpu=1,0" {
		t.Fatalf("round trip: %v %v", back, err)
	}
}
