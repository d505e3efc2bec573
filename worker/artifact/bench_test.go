package artifact

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
)

const benchSize = 100 << 20

// benchArtifact serves benchSize random bytes from a loopback HTTP server
// and returns the artifact that names them with their checksum.
func benchArtifact(b *testing.B) model.Artifact {
	b.Helper()
	body := make([]byte, benchSize)
	rand.Read(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	b.Cleanup(srv.Close)
	a, err := model.NormalizeArtifact(model.Artifact{Source: srv.URL + "/app.jar?checksum=sha256:" + sum(body)})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func benchStager(b *testing.B, dir string) *Stager {
	b.Helper()
	c, err := OpenCache(dir)
	if err != nil {
		b.Fatal(err)
	}
	s := &Stager{Cache: c}
	b.Cleanup(s.httpClient().CloseIdleConnections)
	return s
}

// stageOnce stages a into a fresh unit directory under root, timed, and
// removes it untimed.
func stageOnce(b *testing.B, s *Stager, root string, a model.Artifact) {
	b.Helper()
	dir, err := os.MkdirTemp(root, "unit-")
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	st, err := s.Stage(context.Background(), dir, []model.Artifact{a})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	st.Release()
	os.RemoveAll(dir)
}

// BenchmarkStageCold100MiB: staging a 100 MiB file from loopback HTTP into
// an empty cache: download, SHA-256, fsync, rename, copy into the unit.
func BenchmarkStageCold100MiB(b *testing.B) {
	a := benchArtifact(b)
	root := b.TempDir()
	b.SetBytes(benchSize)
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		cache := filepath.Join(root, "cache")
		s := benchStager(b, cache)
		stageOnce(b, s, root, a)
		os.RemoveAll(cache)
	}
}

// BenchmarkStageCacheHit100MiB: staging the same 100 MiB file once it is
// in the cache: the lookup and the copy into the unit's directory.
func BenchmarkStageCacheHit100MiB(b *testing.B) {
	a := benchArtifact(b)
	root := b.TempDir()
	s := benchStager(b, filepath.Join(root, "cache"))
	b.StopTimer()
	stageOnce(b, s, root, a)
	b.ResetTimer()
	b.SetBytes(benchSize)
	for i := 0; i < b.N; i++ {
		stageOnce(b, s, root, a)
	}
}
