package service

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// A submission asking for more cores or memory than model.MaxCores and
// model.MaxMemoryMB is refused in one line naming the bound, before it
// is committed; at the bounds it passes. Without the bounds, memory_mb
// 9223372036854775807 waited for ever and the UI showed 9007199254740992.0
// GiB.
func TestSubmissionBoundsCoresAndMemory(t *testing.T) {
	req := func(cores int, memoryMB int64) api.SubmitRequest {
		return api.SubmitRequest{Token: "t", DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: cores, MemoryMB: memoryMB}}
	}
	for _, tc := range []struct {
		req  api.SubmitRequest
		want string
	}{
		{req(model.MaxCores, model.MaxMemoryMB), ""},
		{req(model.MaxCores+1, 1024), "driver cores 65537 exceed 65536"},
		{req(2147483648, 1024), "driver cores 2147483648 exceed 65536"},
		{req(1, model.MaxMemoryMB+1), "driver memory 2147483648 MiB exceeds 2147483647 MiB"},
		{req(1, math.MaxInt64), "driver memory 9223372036854775807 MiB exceeds 2147483647 MiB"},
	} {
		_, err := submission(tc.req)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d cores, %d MiB: %v; want it taken", tc.req.Cores, tc.req.MemoryMB, err)
		case tc.want != "" && (!errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d cores, %d MiB: %v; want an invalid request naming %q", tc.req.Cores, tc.req.MemoryMB, err, tc.want)
		}
	}
	if err := model.CheckAsked("executor", model.MaxCores, model.MaxMemoryMB); err != nil {
		t.Errorf("an executor at the bounds: %v", err)
	}
	if err := model.CheckAsked("executor", 1, model.MaxMemoryMB+1); err == nil || !strings.Contains(err.Error(), "executor memory") {
		t.Errorf("an executor past the memory bound: %v", err)
	}
}
