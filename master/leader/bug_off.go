//go:build !drover_bug_early_relaunch

package leader

// earlyRelaunchBug is the chaos suite's deliberately injected bug, off in
// every real build: see bug_on.go.
const earlyRelaunchBug = false
