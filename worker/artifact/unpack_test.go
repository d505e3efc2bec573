package artifact

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	getter "github.com/hashicorp/go-getter/v2"
)

func TestUnpacksTarGzAndZip(t *testing.T) {
	srv := newServer(t)
	tgz := srv.serve("/app.tgz", tarGz(t,
		tarEntry{name: "bin/", kind: tar.TypeDir, mode: 0o755},
		tarEntry{name: "bin/run", body: script, mode: 0o755},
		tarEntry{name: "lib/libx.so.1", body: "lib"},
		tarEntry{name: "lib/libx.so", kind: tar.TypeSymlink, linkname: "libx.so.1"},
		tarEntry{name: "bin/lib", kind: tar.TypeSymlink, linkname: "../lib"},
		tarEntry{name: "lib/same", kind: tar.TypeLink, linkname: "lib/libx.so.1"},
		tarEntry{name: "./", kind: tar.TypeDir},
	))
	zipped := srv.serve("/conf.zip", zipOf(t,
		zipEntry{name: "conf/"},
		zipEntry{name: "conf/app.properties", body: "a=1\n", mode: 0o600},
		zipEntry{name: "conf/current", body: "app.properties", mode: fs.ModeSymlink | 0o777},
	))
	s := newStager(t, nil)
	dir, _ := mustStage(t, s, normalized(t, tgz), normalized(t, zipped))
	want := []string{
		"bin/", "bin/lib@../lib", "bin/run -rwxr-xr-x",
		"conf/", "conf/app.properties -rw-------", "conf/current@app.properties",
		"lib/", "lib/libx.so@libx.so.1", "lib/libx.so.1 -rw-r--r--", "lib/same -rw-r--r--",
		"spec.json -rw-------",
	}
	if got := listing(t, dir); !slices.Equal(got, want) {
		t.Fatalf("staged\n%v\nwant\n%v", got, want)
	}
	a, _ := os.Stat(filepath.Join(dir, "lib/libx.so.1"))
	b, _ := os.Stat(filepath.Join(dir, "lib/same"))
	if !os.SameFile(a, b) {
		t.Fatal("lib/same is not a hard link of lib/libx.so.1")
	}
	if got, err := os.ReadFile(filepath.Join(dir, "bin/lib/libx.so")); err != nil || string(got) != "lib" {
		t.Fatalf("bin/lib/libx.so = %q, %v", got, err)
	}
}

// A plain .tar is unpacked like a compressed one, modes and links kept.
func TestUnpacksPlainTar(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/app.tar", tarOf(t,
		tarEntry{name: "bin/run", body: script, mode: 0o755},
		tarEntry{name: "etc/app.conf", body: "a=1\n", mode: 0o600},
		tarEntry{name: "run", kind: tar.TypeSymlink, linkname: "bin/run"},
	))
	s := newStager(t, nil)
	dir, _ := mustStage(t, s, normalized(t, url))
	want := []string{"bin/", "bin/run -rwxr-xr-x", "etc/", "etc/app.conf -rw-------", "run@bin/run", "spec.json -rw-------"}
	if got := listing(t, dir); !slices.Equal(got, want) {
		t.Fatalf("staged\n%v\nwant\n%v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "run")); err != nil || string(b) != script {
		t.Fatalf("run = %q, %v", b, err)
	}
}

// ?archive=false stages an archive as the one file it is, its bytes
// those served.
func TestArchiveFalseKeepsItPacked(t *testing.T) {
	srv := newServer(t)
	zipped := zipOf(t, zipEntry{name: "index.html", body: "<p>"})
	url := srv.serve("/a.zip", zipped)
	s := newStager(t, nil)
	dir, _ := mustStage(t, s, normalized(t, url+"?archive=false"))
	if got, want := listing(t, dir), []string{"a.zip -rw-r--r--", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.zip")); err != nil || !bytes.Equal(b, zipped) {
		t.Fatalf("a.zip holds %d bytes (%v), not the %d of the zip served", len(b), err, len(zipped))
	}
	if n := srv.count("/a.zip"); n != 1 {
		t.Fatalf("%d requests for /a.zip, want 1", n)
	}
}

// An archive goes to its Dest, beside the other artifacts.
func TestArchiveDest(t *testing.T) {
	srv := newServer(t)
	url := srv.serve("/site.zip", zipOf(t, zipEntry{name: "index.html", body: "<p>"}))
	a := normalized(t, url)
	a.Dest = "www/static"
	s := newStager(t, nil)
	dir, _ := mustStage(t, s, a, normalized(t, srv.serve("/app.sh", []byte(script))))
	want := []string{"app.sh -rwxr-xr-x", "spec.json -rw-------", "www/", "www/static/", "www/static/index.html -rw-r--r--"}
	if got := listing(t, dir); !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
}

// Archives that would write outside their directory, or make a link out
// of it, are refused whole, and nothing is written anywhere.
func TestRefusesEscapingArchives(t *testing.T) {
	srv := newServer(t)
	for _, c := range []struct {
		name    string
		archive []byte
		want    string
	}{
		{"zip-slip.zip", zipOf(t, zipEntry{name: "ok"}, zipEntry{name: "../evil", body: "x"}), "entry ../evil leaves the directory"},
		{"zip-slip.tgz", tarGz(t, tarEntry{name: "a/../../evil", body: "x"}), "entry a/../../evil leaves the directory"},
		{"absolute.tgz", tarGz(t, tarEntry{name: "/tmp/evil", body: "x"}), "entry /tmp/evil has an absolute path"},
		{"absolute.zip", zipOf(t, zipEntry{name: "/tmp/evil", body: "x"}), "entry /tmp/evil has an absolute path"},
		{"symlink-out.tgz", tarGz(t, tarEntry{name: "l", kind: tar.TypeSymlink, linkname: "../../evil"}), "symlink l -> ../../evil points out of the archive"},
		{"symlink-abs.zip", zipOf(t, zipEntry{name: "l", body: "/etc", mode: fs.ModeSymlink | 0o777}), `symlink l -> "/etc" points out of the archive`},
		{"symlink-chain.tgz", tarGz(t,
			tarEntry{name: "d/", kind: tar.TypeDir},
			tarEntry{name: "d/up", kind: tar.TypeSymlink, linkname: ".."},
			tarEntry{name: "x", kind: tar.TypeSymlink, linkname: "d/up/.."}),
			"symlink x -> d/up/.. points out of the archive"},
		{"dangling.tgz", tarGz(t, tarEntry{name: "l", kind: tar.TypeSymlink, linkname: "nothing"}), "symlink l -> nothing points to nothing in the archive"},
		{"below-symlink.tgz", tarGz(t,
			tarEntry{name: "d", kind: tar.TypeSymlink, linkname: "."},
			tarEntry{name: "d/f", body: "x"}),
			"entry d/f is below d, which is not a directory"},
		{"hardlink-out.tgz", tarGz(t, tarEntry{name: "l", kind: tar.TypeLink, linkname: "../etc/passwd"}), "hard link l: entry ../etc/passwd leaves the directory"},
		{"device.tgz", tarGz(t, tarEntry{name: "null", kind: tar.TypeChar}), `entry null is not a file, directory or link (tar type '3')`},
		{"twice.tgz", tarGz(t, tarEntry{name: "f", body: "1"}, tarEntry{name: "./f", body: "2"}), "entry f appears twice"},
		{"not-an-archive.zip", []byte("plain text"), "not a zip: zip: not a valid zip file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := srv.serve("/"+c.name, c.archive)
			s := newStager(t, nil)
			assertFails(t, s, "stage "+url+": "+c.want, normalized(t, url))
		})
	}
}

func TestUnpackLimits(t *testing.T) {
	srv := newServer(t)
	many := srv.serve("/many.tgz", tarGz(t, tarEntry{name: "a"}, tarEntry{name: "b"}, tarEntry{name: "c"}))
	big := srv.serve("/big.zip", zipOf(t, zipEntry{name: "a", body: strings.Repeat("x", 3000)}))
	s := newStager(t, func(s *Stager) { s.Limits.MaxFiles, s.Limits.MaxUnpackedSize = 2, 2000 })
	assertFails(t, s, "stage "+many+": too large: more than 2 entries", normalized(t, many))
	assertFails(t, s, "stage "+big+": too large: more than 2.0 KiB unpacked", normalized(t, big))
	// Exactly at the bounds is fine.
	s = newStager(t, func(s *Stager) { s.Limits.MaxFiles = 3 })
	mustStage(t, s, normalized(t, many))
}

// Artifacts must not stage the same path, nor one the directory holds.
func TestCollisions(t *testing.T) {
	srv := newServer(t)
	file := srv.serve("/app.sh", []byte(script))
	arch := srv.serve("/app.tgz", tarGz(t, tarEntry{name: "app.sh", body: script}))
	lib := srv.serve("/lib.tgz", tarGz(t, tarEntry{name: "lib/a.jar", body: "a"}))
	lib2 := srv.serve("/lib2.tgz", tarGz(t, tarEntry{name: "lib/a.jar", body: "b"}, tarEntry{name: "lib/b.jar", body: "b"}))
	lib3 := srv.serve("/lib3.tgz", tarGz(t, tarEntry{name: "lib/c.jar", body: "c"}))
	asFile := srv.serve("/lib", []byte("a file"))
	fileInArchive := srv.serve("/libfile.zip", zipOf(t, zipEntry{name: "lib", body: "a file"}))
	spec := srv.serve("/spec.zip", zipOf(t, zipEntry{name: "spec.json", body: "x"}))
	s := newStager(t, nil)
	assertFails(t, s, "stage "+arch+": app.sh is staged by "+file+" too", normalized(t, file), normalized(t, arch))
	assertFails(t, s, "stage "+lib2+": lib/a.jar is staged by "+lib+" too", normalized(t, lib), normalized(t, lib2))
	assertFails(t, s, "stage "+asFile+": lib is staged by "+lib+" too", normalized(t, lib), normalized(t, asFile))
	assertFails(t, s, "stage "+fileInArchive+": lib is staged by "+lib+" too", normalized(t, lib), normalized(t, fileInArchive))
	assertFails(t, s, "stage "+spec+": spec.json already exists in the directory", normalized(t, spec))
	// Directories merge.
	dir, _ := mustStage(t, s, normalized(t, lib), normalized(t, lib3))
	if got, want := listing(t, dir), []string{"lib/", "lib/a.jar -rw-r--r--", "lib/c.jar -rw-r--r--", "spec.json -rw-------"}; !slices.Equal(got, want) {
		t.Fatalf("staged %v, want %v", got, want)
	}
}

// TestGoGetterDecompressors pins what this package relies on, and covers
// for, in go-getter's decompressors: they refuse ".." entries themselves,
// but put an absolute name under the destination without refusing it and
// write a symlink as a regular file.
func TestGoGetterDecompressors(t *testing.T) {
	dec := getter.LimitedDecompressors(10, 1<<20)
	write := func(name string, b []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		format string
		src    string
	}{
		{"tar.gz", write("a.tgz", tarGz(t, tarEntry{name: "../evil", body: "x"}))},
		{"zip", write("a.zip", zipOf(t, zipEntry{name: "../evil", body: "x"}))},
	} {
		dst := filepath.Join(t.TempDir(), "out")
		if err := dec[c.format].Decompress(dst, c.src, true, 0); err == nil || !strings.Contains(err.Error(), "..") {
			t.Fatalf("%s zip-slip: err = %v", c.format, err)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(dst), "evil")); err == nil {
			t.Fatalf("%s: go-getter wrote outside the destination", c.format)
		}
	}
	dst := filepath.Join(t.TempDir(), "out")
	src := write("b.tgz", tarGz(t, tarEntry{name: "/abs", body: "x"}, tarEntry{name: "l", kind: tar.TypeSymlink, linkname: "/etc/passwd"}))
	if err := dec["tar.gz"].Decompress(dst, src, true, 0); err != nil {
		t.Fatal(err)
	}
	if got := listing(t, dst); !slices.Equal(got, []string{"abs -rw-r--r--", "l -rw-r--r--"}) {
		t.Fatalf("go-getter made %v; scan's checks assume an absolute name kept inside and a symlink made a plain file", got)
	}
}
