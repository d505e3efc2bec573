package atomicfile_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/drover-project/drover/internal/atomicfile"
)

// Replace gives the file its content and exactly its mode, whatever the
// umask, durable or not; when it cannot rename, the old file stays as it
// was and no temporary file is left beside it.
func TestReplace(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o077))
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.pem")
	for _, c := range []struct {
		mode    os.FileMode
		durable bool
		content string
	}{{0o644, false, "one"}, {0o600, true, "two"}, {0o640, true, "three"}} {
		if err := atomicfile.Replace(path, []byte(c.content), c.mode, c.durable); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || serr != nil || string(b) != c.content || fi.Mode().Perm() != c.mode {
			t.Fatalf("after Replace(%q, %04o): read %q (%v), mode %v (%v)", c.content, c.mode, b, err, fi.Mode(), serr)
		}
	}
	// A non-empty directory cannot be renamed over.
	busy := filepath.Join(dir, "busy")
	if err := os.MkdirAll(filepath.Join(busy, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Replace(busy, []byte("four"), 0o644, true); err == nil {
		t.Fatal("Replace over a non-empty directory succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("dir holds %v, want ca.pem and busy alone", entries)
	}
}
