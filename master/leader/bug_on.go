//go:build drover_bug_early_relaunch

package leader

// earlyRelaunchBug, set only by the drover_bug_early_relaunch build tag,
// makes a strict-mode leader declare a silent worker lost after
// WorkerTimeout instead of lease plus margin, so a relaunch can overlap the
// attempt still running on a cut-off worker. The chaos suite builds with it
// to prove that it catches such a bug.
const earlyRelaunchBug = true
