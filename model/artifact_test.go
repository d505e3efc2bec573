package model

import (
	"errors"
	"strings"
	"testing"
)

const hexA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestNormalizeArtifact(t *testing.T) {
	for _, c := range []struct {
		in   Artifact
		want Artifact
	}{
		{Artifact{Source: "https://h/x/app.sh"}, Artifact{Source: "https://h/x/app.sh", URL: "https://h/x/app.sh", Name: "app.sh"}},
		{Artifact{Source: "http://h:8080/a.tar.gz?checksum=sha256:" + strings.ToUpper(hexA) + "&sig=1"},
			Artifact{Source: "http://h:8080/a.tar.gz?checksum=sha256:" + strings.ToUpper(hexA) + "&sig=1", URL: "http://h:8080/a.tar.gz?sig=1", SHA256: hexA, Archive: "tar.gz"}},
		{Artifact{Source: "file:///opt/job.tgz", Dest: "lib"}, Artifact{Source: "file:///opt/job.tgz", URL: "file:///opt/job.tgz", Archive: "tar.gz", Dest: "lib"}},
		{Artifact{Source: "https://h/a.zip?archive=false"}, Artifact{Source: "https://h/a.zip?archive=false", URL: "https://h/a.zip", Name: "a.zip"}},
		{Artifact{Source: "https://h/blob?archive=tgz"}, Artifact{Source: "https://h/blob?archive=tgz", URL: "https://h/blob", Archive: "tar.gz"}},
		{Artifact{Upload: hexA, Name: "run.sh", Mode: 0o755}, Artifact{Upload: hexA, SHA256: hexA, Name: "run.sh", Mode: 0o755}},
		{Artifact{Upload: hexA, Name: "dist.zip"}, Artifact{Upload: hexA, SHA256: hexA, Name: "dist.zip", Archive: "zip"}},
	} {
		got, err := NormalizeArtifact(c.in)
		if err != nil {
			t.Errorf("%+v: %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("%+v:\n got %+v\nwant %+v", c.in, got, c.want)
		}
		if err := ValidateArtifacts([]Artifact{got}); err != nil {
			t.Errorf("normalized %+v is not valid: %v", got, err)
		}
	}
}

func TestNormalizeArtifactRefuses(t *testing.T) {
	for _, c := range []struct {
		in   Artifact
		want string
	}{
		{Artifact{}, "needs a source"},
		{Artifact{Source: "ftp://h/a"}, `scheme "ftp"`},
		{Artifact{Source: "s3::https://h/a"}, "scheme"},
		{Artifact{Source: "/opt/a.sh"}, "scheme"},
		{Artifact{Source: "https:///a"}, "no host"},
		{Artifact{Source: "file://other/a"}, "not host other"},
		{Artifact{Source: "https://h/"}, "no file name"},
		{Artifact{Source: "https://h/a?checksum=md5:abc"}, "use sha256"},
		{Artifact{Source: "https://h/a?checksum=sha256:abc"}, "not 64 hex"},
		{Artifact{Source: "https://h/a?checksum=" + hexA}, "TYPE:HEX"},
		{Artifact{Source: "https://h/a?archive=rar"}, `archive "rar"`},
		{Artifact{Source: "https://h/a?archive=zip&archive=tar"}, "2 times"},
		{Artifact{Source: "https://h/a", Dest: "../x"}, "leaves"},
		{Artifact{Source: "https://h/a", Dest: "/x"}, "relative"},
		{Artifact{Source: "https://h/a", Dest: "a//b"}, "not a clean path"},
		{Artifact{Source: "https://h/a", Name: "b"}, "for uploads"},
		{Artifact{Source: "https://h/a", URL: "https://h/b"}, "derived"},
		{Artifact{Source: "https://h/a", Upload: hexA}, "both"},
		{Artifact{Upload: "ABC", Name: "a"}, "not a SHA-256"},
		{Artifact{Upload: hexA}, "no file name"},
		{Artifact{Upload: hexA, Name: "a/b"}, "slash"},
		{Artifact{Upload: hexA, Name: "a", Mode: 0o4755}, "permission bits"},
		{Artifact{Source: "https://alice:s3cret@h/a"}, "may not carry credentials"},
		{Artifact{Source: "https://ghp_token@h/a"}, "may not carry credentials"},
	} {
		_, err := NormalizeArtifact(c.in)
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "ghp_token")) {
			t.Errorf("%+v: the refusal repeats the credential: %v", c.in, err)
		}
		if !errors.Is(err, ErrInvalidArtifact) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: err = %v, want ErrInvalidArtifact with %q", c.in, err, c.want)
		}
	}
}

func TestNormalizeArtifactsRefusesCollisions(t *testing.T) {
	_, err := NormalizeArtifacts([]Artifact{{Source: "https://h/a/app.sh"}, {Upload: hexA, Name: "app.sh"}})
	if !errors.Is(err, ErrInvalidArtifact) || !strings.Contains(err.Error(), "both stage app.sh") {
		t.Fatalf("err = %v", err)
	}
	if _, err := NormalizeArtifacts([]Artifact{{Source: "https://h/a/app.sh"}, {Source: "https://h/b/app.sh", Dest: "b"}}); err != nil {
		t.Fatalf("different dests: %v", err)
	}
	many := make([]Artifact, MaxArtifacts+1)
	if _, err := NormalizeArtifacts(many); !errors.Is(err, ErrInvalidArtifact) {
		t.Fatalf("too many: %v", err)
	}
}

func TestValidateArtifactsRefusesUnnormalized(t *testing.T) {
	for _, a := range []Artifact{
		{Source: "https://h/a"},
		{URL: "https://h/a", Upload: hexA, SHA256: hexA, Name: "a"},
		{Upload: hexA, Name: "a"},
		{URL: "https://h/a", Archive: "tgz"},
		{URL: "https://h/a", SHA256: "x", Name: "a"},
		{URL: "https://h/a"},
		{URL: "https://h/a", Name: "a", Dest: "../b"},
	} {
		if err := ValidateArtifacts([]Artifact{a}); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%+v: err = %v, want ErrInvalidCommand", a, err)
		}
	}
}
