package master

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// hclog's levels reach slog as the same levels.
func TestRaftLogLevels(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: levelWriter{log}, DisableTime: true})
	h.Warn("heartbeat timeout reached", "last-leader-id", "m1")
	h.Error("failed to contact", "server-id", "m2")
	h.Info("entering follower state")
	out := buf.String()
	for _, want := range []string{
		`level=WARN msg="heartbeat timeout reached: last-leader-id=m1"`,
		`level=ERROR msg="failed to contact: server-id=m2"`,
		`level=INFO msg="entering follower state"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
}
