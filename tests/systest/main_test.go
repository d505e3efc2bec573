package systest

import (
	"os"
	"testing"

	"github.com/drover-project/drover/tests/testcluster"
)

// TestMain removes the drover binary the package's tests built and shared.
func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.RemoveBuilt()
	os.Exit(code)
}
