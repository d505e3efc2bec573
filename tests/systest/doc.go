// Package systest is Drover's process-level test suite. Each test starts a
// real cluster with internal/testcluster: masters and workers as separate
// drover processes built from cmd/drover (with the race detector when the
// tests run with -race), on loopback addresses of their own, and drives it
// from outside as users and operators do, through the HTTP API, the Go
// client, the drover CLI, Spark's REST protocol and a browser.
//
// The suite covers drivers through leader and worker kills, supervision and
// kills (drivers_test.go); applications and executors (apps_test.go); worker
// liveness, pauses, restarts, decommissioning and fencing across network
// partitions (liveness_test.go); refused input and the CLI's exit codes
// (badinput_test.go); quorum changes and snapshots (operator_test.go);
// attacks on a secured cluster, TLS and tokens (security_test.go); Spark's
// REST protocol (sparkrest_test.go); Prometheus metrics, scraped directly
// (metrics_test.go) and by a real Prometheus with the documented config
// (prometheus_test.go); the web UI (ui_test.go); drover dev's restarts,
// stop and Spark ports (dev_test.go); uploaded files across a leader's
// SIGKILL and a restart, then staged by a worker started after it
// (uploads_test.go); artifacts from a loopback HTTP server staged for
// drivers and executors, and a checksum mismatch (artifacts_test.go);
// custom resources such as GPUs across a leader's SIGKILL, and bounded
// supervision with --max-restarts and --reschedule-after
// (resources_test.go); isolation in cgroups: an out-of-memory kill, setsid
// grandchildren through kills, adoption and decommission, a CPU quota
// (isolation_test.go); and the distributed word count of
// examples/wordcount (wordcount_test.go). Its benchmarks measure failover
// (failover_bench_test.go), submission throughput, latency and placement
// (throughput_bench_test.go), which make bench runs, the upload store's
// disk use after garbage collection and the time of a 100 MiB upload
// (uploads_bench_test.go), the cold staging of a 100 MiB upload
// (artifacts_bench_test.go), and the time a starved namespace takes to
// reach 90 % of its fair share with and without preemption
// (fairshare_bench_test.go).
//
// Run it from the repository root, as make test does with every package:
//
//	go test -race -count=1 ./systest
//
// The partition tests (TestStrictFencingIsolatedWorker and
// TestDefaultFencingIsolatedWorker) need root, unshare, ip and iptables, to
// cut nodes apart in a private network namespace; without them they skip
// and say what is missing. The isolation tests need root and cgroups, and
// skip saying which is missing. TestWebUIInChromium skips unless chromium is
// installed, TestPrometheusScrapesSecuredMasters unless prometheus is, and
// -short skips the word count over the Go source tree.
package systest
