package model

import (
	"strings"
	"testing"
)

// A driver's AppCores pass Validate from 0 (unknown, as in entries
// written before them) to MaxAppCores; -1 and one past the bound are one
// line naming the field and the bound.
func TestValidateAppCores(t *testing.T) {
	for _, n := range []int{0, 1, MaxAppCores} {
		s := DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, AppCores: n}
		if err := s.Validate(); err != nil {
			t.Errorf("app cores %d: %v", n, err)
		}
	}
	for _, n := range []int{-1, MaxAppCores + 1} {
		s := DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, AppCores: n}
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "app cores must be 0 (unknown) to 1048576") {
			t.Errorf("app cores %d: %v", n, err)
		}
	}
}
