package plural

import "testing"

// One takes the singular; none, many and a negative count the plural.
func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "driver", "1 driver"},
		{0, "core", "0 cores"},
		{2, "running driver", "2 running drivers"},
		{-1, "core", "-1 cores"},
	} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
