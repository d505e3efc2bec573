package systest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/worker/artifact"
)

// BenchmarkStageUpload100MiB times the staging of a DROVER_BENCH_UPLOAD_MIB
// file (100, -short 20) uploaded to a three-master cluster into a unit's
// directory through an empty cache, as a worker's runner stages it: the
// same artifact.Stager over client.OpenBlob, reading from the first master
// that holds the file, hashing, fsyncing and renaming it into the cache,
// then copying it out. The upload itself is untimed; the HTTP and cache-hit
// figures are artifact's BenchmarkStageCold100MiB and
// BenchmarkStageCacheHit100MiB.
func BenchmarkStageUpload100MiB(b *testing.B) {
	mib := tputEnvInt(b, "DROVER_BENCH_UPLOAD_MIB", 100, 20)
	c, _ := tputCluster(b, testcluster.Options{})
	cl := c.Client()
	root := b.TempDir()
	path := filepath.Join(root, "app.jar")
	writeRandom(b, path, int64(mib)<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, err := cl.Upload(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	if a, err = model.NormalizeArtifact(a); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		cache, err := artifact.OpenCache(filepath.Join(root, "cache"))
		if err != nil {
			b.Fatal(err)
		}
		dir, err := os.MkdirTemp(root, "unit-")
		if err != nil {
			b.Fatal(err)
		}
		s := &artifact.Stager{Cache: cache, Blobs: cl}
		b.StartTimer()
		start := time.Now()
		st, err := s.Stage(ctx, dir, []model.Artifact{a})
		total += time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		st.Release()
		os.RemoveAll(dir)
		os.RemoveAll(cache.Dir())
		b.StartTimer()
	}
	per := total.Seconds() / float64(b.N)
	b.ReportMetric(per, "s/stage")
	b.ReportMetric(float64(mib)/per, "MiB/s")
	b.Logf("cold staging of a %d MiB upload from three masters: %.2f s (%.0f MiB/s)", mib, per, float64(mib)/per)
}
