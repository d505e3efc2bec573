//go:build !linux

package runner

// becomeSubreaper does nothing where there are no child subreapers; orphans
// go to init, which reaps them.
func becomeSubreaper() {}
