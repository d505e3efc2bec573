package systest

// Benchmarks of the masters' store of uploaded files on a real three-master
// cluster (separate drover processes, every file fsynced as in
// production). They report figures and fail only when the cluster does
// not work at all. Sizes come from environment variables:
//
//	DROVER_BENCH_UPLOADS      uploads of BenchmarkUploadGC: 1000, -short 100
//	DROVER_BENCH_UPLOAD_KIB   size of each, KiB: 64
//	DROVER_BENCH_UPLOAD_MIB   size of BenchmarkUpload100MiB's file: 100, -short 20
//
// For example:
//
//	go test -run '^$' -bench 'Upload' -benchtime 1x ./systest/

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// BenchmarkUploadGC uploads DROVER_BENCH_UPLOADS files, submits one driver
// naming each (no worker runs them, so they stay SUBMITTED: live), kills
// nine in ten, and waits until every master's garbage collection has
// deleted the files those named. It reports the masters' disk use (the
// blocks of DATA_DIR/blobs, as du counts them) before and after, and how
// long the collection took after the last kill (--upload-grace 1s,
// --upload-sync-interval 200ms).
func BenchmarkUploadGC(b *testing.B) {
	n := tputEnvInt(b, "DROVER_BENCH_UPLOADS", 1000, 100)
	kib := tputEnvInt(b, "DROVER_BENCH_UPLOAD_KIB", 64, 64)
	keep := n / 10
	for b.Loop() {
		c, _ := tputCluster(b, testcluster.Options{MasterArgs: []string{"--upload-grace", "1s", "--upload-sync-interval", "200ms"}})
		cl := c.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		dir := b.TempDir()
		var ids []string
		start := time.Now()
		for i := range n {
			path := filepath.Join(dir, "file-"+strconv.Itoa(i))
			writeRandom(b, path, int64(kib)<<10)
			a, err := cl.Upload(ctx, path)
			if err != nil {
				b.Fatal(err)
			}
			res, err := cl.Submit(ctx, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./" + a.Name}, Cores: 1, MemoryMB: 64, Artifacts: []model.Artifact{a}}})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, res.DriverID)
		}
		uploaded := time.Since(start)
		awaitStores(b, c, n, "every master holds every upload")
		before := storesDiskUse(b, c)
		for _, id := range ids[keep:] {
			if err := cl.Kill(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		killed := time.Now()
		awaitStores(b, c, keep, "garbage collection of the killed drivers' uploads")
		collected := time.Since(killed)
		after := storesDiskUse(b, c)
		cancel()

		b.ReportMetric(float64(before)/float64(len(c.Masters))/(1<<20), "MiB/master_before_gc")
		b.ReportMetric(float64(after)/float64(len(c.Masters))/(1<<20), "MiB/master_after_gc")
		b.ReportMetric(collected.Seconds(), "s_gc_after_last_kill")
		b.ReportMetric(uploaded.Seconds()/float64(n)*1000, "ms/upload+submit")
		b.Logf("%d uploads of %d KiB, %d still named: each master's DATA_DIR/blobs held %.1f MiB before and %.1f MiB after garbage collection (%.1f s after the last kill)",
			n, kib, keep, float64(before)/float64(len(c.Masters))/(1<<20), float64(after)/float64(len(c.Masters))/(1<<20), collected.Seconds())
	}
}

// BenchmarkUpload100MiB times client.Upload of a new DROVER_BENCH_UPLOAD_MIB
// file (hashing it, sending it to one master, which stores it and pushes
// it to the two others before it answers) on a three-master cluster.
func BenchmarkUpload100MiB(b *testing.B) {
	mib := tputEnvInt(b, "DROVER_BENCH_UPLOAD_MIB", 100, 20)
	c, _ := tputCluster(b, testcluster.Options{MasterArgs: []string{"--upload-grace", "1s", "--upload-sync-interval", "1s"}})
	cl := c.Client()
	path := filepath.Join(b.TempDir(), "big.bin")
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		writeRandom(b, path, int64(mib)<<20)
		b.StartTimer()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		if _, err := cl.Upload(ctx, path); err != nil {
			b.Fatal(err)
		}
		cancel()
		total += time.Since(start)
	}
	per := total.Seconds() / float64(b.N)
	b.ReportMetric(per, "s/upload")
	b.ReportMetric(float64(mib)/per, "MiB/s")
	b.Logf("upload of %d MiB to three masters: %.2f s (%.0f MiB/s)", mib, per, float64(mib)/per)
}

// writeRandom writes size random bytes to path.
func writeRandom(b *testing.B, path string, size int64) {
	b.Helper()
	buf := make([]byte, size)
	if _, err := rand.Read(buf); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.Fatal(err)
	}
}

// awaitStores waits until every master's store holds n files, by its
// /v1/state.
func awaitStores(b *testing.B, c *testcluster.Cluster, n int, what string) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		done := true
		for _, m := range c.Masters {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := testcluster.State(ctx, m)
			cancel()
			if err != nil || st.Blobs.Files != n {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within 5m", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// storesDiskUse is the disk the masters' stores take together: the blocks
// of every file in DATA_DIR/blobs, and of the directory itself, as du
// counts them.
func storesDiskUse(b *testing.B, c *testcluster.Cluster) int64 {
	b.Helper()
	var total int64
	for _, m := range c.Masters {
		dir := filepath.Join(m.Dir, "blobs")
		err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return total
}
