package master

import (
	"strings"
	"testing"
	"time"
)

// --spark-rest-leader-wait takes 0 (no wait) to a minute, and refuses a
// negative wait or one past a minute in one line naming the flag.
func TestSparkRESTLeaderWaitBound(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		ok   bool
	}{
		{0, true},
		{DefaultSparkRESTLeaderWait, true},
		{time.Minute, true},
		{time.Minute + time.Millisecond, false},
		{-time.Millisecond, false},
	} {
		cfg := DefaultConfig()
		cfg.ID, cfg.DataDir, cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = "m1", t.TempDir(), 7101, 7102, 7103
		cfg.SparkRESTLeaderWait = tc.wait
		err := cfg.validate()
		refused := err != nil && strings.Contains(err.Error(), "--spark-rest-leader-wait")
		if refused == tc.ok {
			t.Errorf("wait %s: validate() = %v, want accepted %v", tc.wait, err, tc.ok)
		}
		if !tc.ok && !strings.Contains(err.Error(), "is outside 0 to 1m0s") {
			t.Errorf("wait %s: %v does not name the bound", tc.wait, err)
		}
	}
}
