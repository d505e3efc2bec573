package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// submit --upload stores each file on the masters before the driver is
// submitted, and the driver names it by digest, base name and mode; a
// majority of the masters hold it once submit has its ID. A file that is
// missing, not a regular file, or whose name another artifact takes is
// refused in one line before anything is sent.
func TestSubmitUploads(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.MaxUpload = 1 << 20 })
	cl, ctx := c.Client(), c.Context()
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.HTTP())
	}
	masters := strings.Join(addrs, ",")
	dir := t.TempDir()
	script, data := filepath.Join(dir, "run.sh"), filepath.Join(dir, "data.bin")
	files := map[string][]byte{script: []byte("#!/bin/sh\necho hi\n"), data: []byte(strings.Repeat("d", 100<<10))}
	for f, b := range files {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(script, 0o750); err != nil {
		t.Fatal(err)
	}
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

	stdout, stderr, code := drover("client", "submit", "--masters", masters, "--timeout", "1s",
		"--upload", script, "--upload", data, "--", "./run.sh")
	// No worker runs: the driver is accepted and stays queued.
	if code != exitUnplaceable && code != exitNotRunning {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Count(stderr, "uploaded ") != 2 {
		t.Errorf("stderr %q does not report both uploads", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	d, err := cl.Driver(ctx, lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Artifact{
		{Upload: digest(files[script]), Name: "run.sh", Mode: 0o750},
		{Upload: digest(files[data]), Name: "data.bin", Mode: 0o600},
	}
	var got []model.Artifact
	for _, a := range d.Artifacts {
		got = append(got, model.Artifact{Upload: a.Upload, Name: a.Name, Mode: a.Mode})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("driver artifacts %+v, want %+v", d.Artifacts, want)
	}
	for f, b := range files {
		holders := 0
		for _, n := range c.Nodes {
			r, err := c.Client(n).OpenBlob(ctx, digest(b))
			if err != nil {
				continue
			}
			held, err := io.ReadAll(r)
			r.Close()
			if err == nil && string(held) == string(b) {
				holders++
			}
		}
		if holders < 2 {
			t.Errorf("%s is held by %d of 3 masters once submitted, want a majority", f, holders)
		}
	}

	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(other, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing file", []string{"--upload", filepath.Join(dir, "nope")}, "no such file"},
		{"a directory", []string{"--upload", dir}, "is not a regular file"},
		{"two files of one name", []string{"--upload", script, "--upload", other}, "run.sh"},
		{"a URL artifact's name", []string{"--artifact", "https://h/run.sh", "--upload", script}, "run.sh"},
		{"a file over the masters' --max-upload", []string{"--upload", big}, "big.bin"},
	} {
		args := append([]string{"client", "submit", "--masters", masters}, tc.args...)
		_, stderr, code := drover(append(args, "--", "./run.sh")...)
		if code != 1 || !strings.HasPrefix(stderr, "drover: --upload: ") || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line naming %q", tc.name, code, stderr, tc.want)
		}
	}
	after, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.StateHash != before.StateHash || len(after.Drivers) != len(before.Drivers) {
		t.Fatalf("refused uploads changed the tables: %d drivers -> %d", len(before.Drivers), len(after.Drivers))
	}
}
