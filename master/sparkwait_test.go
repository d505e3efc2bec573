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

// --preemption-grace takes 1s to 1h and --preemption-interval 100ms to a
// minute, each bound itself included; just past either end is refused in
// one line naming the flag and its bounds.
func TestPreemptionBounds(t *testing.T) {
	for _, tc := range []struct {
		grace, interval time.Duration
		refused         string
	}{
		{MinPreemptionGrace, MinPreemptionInterval, ""},
		{MaxPreemptionGrace, MaxPreemptionInterval, ""},
		{MinPreemptionGrace - time.Millisecond, time.Second, "--preemption-grace 999ms is outside 1s to 1h0m0s"},
		{MaxPreemptionGrace + time.Millisecond, time.Second, "--preemption-grace 1h0m0.001s is outside 1s to 1h0m0s"},
		{time.Second, MinPreemptionInterval - time.Millisecond, "--preemption-interval 99ms is outside 100ms to 1m0s"},
		{time.Second, MaxPreemptionInterval + time.Millisecond, "--preemption-interval 1m0.001s is outside 100ms to 1m0s"},
	} {
		cfg := DefaultConfig()
		cfg.ID, cfg.DataDir, cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = "m1", t.TempDir(), 7101, 7102, 7103
		cfg.PreemptionGrace, cfg.PreemptionInterval = tc.grace, tc.interval
		err := cfg.validate()
		if tc.refused == "" && err != nil || tc.refused != "" && (err == nil || err.Error() != tc.refused) {
			t.Errorf("grace %s, interval %s: validate() = %v, want %q", tc.grace, tc.interval, err, tc.refused)
		}
	}
}
