//go:build race

package testcluster

// raceEnabled builds the cluster's binary with the race detector when the
// tests themselves run with -race, so process-level tests check the product
// code for races too.
const raceEnabled = true
