package pki

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func randomKeyText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestParseRaftKey(t *testing.T) {
	good := randomKeyText(t, RaftKeyLen)
	if _, err := ParseRaftKey(" " + good + "\n"); err != nil {
		t.Fatalf("a drover keygen key: %v", err)
	}
	for _, bad := range []string{
		"",
		randomKeyText(t, RaftKeyLen-1),
		randomKeyText(t, RaftKeyLen+1),
		"not base64 at all, but long enough to be a key",
		base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, RaftKeyLen)),
	} {
		k, err := ParseRaftKey(bad)
		if err == nil {
			t.Fatalf("ParseRaftKey(%q) = %v, want an error", bad, k)
		}
		if bad != "" && strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "drover keygen") {
			t.Fatalf("error %q repeats the input or does not say how to make a key", err)
		}
	}
}

func TestLoadRaftKey(t *testing.T) {
	dir := t.TempDir()
	text := randomKeyText(t, RaftKeyLen)
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const env = "DROVER_TEST_RAFT_KEY"
	want, err := ParseRaftKey(text)
	if err != nil {
		t.Fatal(err)
	}

	k, err := LoadRaftKey(write("raft.key", text+"\n", 0o600), env)
	if err != nil || k.Credential() != want.Credential() {
		t.Fatalf("from a file: %v, %v", k, err)
	}
	t.Setenv(env, text)
	if k, err := LoadRaftKey("", env); err != nil || k.Credential() != want.Credential() {
		t.Fatalf("from $%s: %v, %v", env, k, err)
	}
	t.Setenv(env, "")
	if k, err := LoadRaftKey("", env); err != nil || k != nil {
		t.Fatalf("neither given: %v, %v; want none", k, err)
	}

	for _, tc := range []struct {
		name, path, want string
	}{
		{"readable by others", write("open.key", text, 0o644), "chmod 600"},
		{"empty", write("empty.key", "\n", 0o600), "is empty"},
		{"too short", write("short.key", randomKeyText(t, 16), 0o600), "is 16 bytes, want 32"},
		{"absent", filepath.Join(dir, "absent"), "no such file"},
	} {
		k, err := LoadRaftKey(tc.path, env)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "raft key") {
			t.Fatalf("%s: %v, %v; want an error about the raft key saying %q", tc.name, k, err, tc.want)
		}
		if strings.Contains(err.Error(), text) {
			t.Fatalf("%s: error %q repeats the key", tc.name, err)
		}
	}
	if _, err := LoadRaftKey(filepath.Join(dir, "absent"), env); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent file: %v, want fs.ErrNotExist", err)
	}
}

// Every master holding a key makes the same credential and the same
// certificate of it; another key makes others, the credential does not
// show the key, and neither the key nor its certificate passes for a
// node of a CA.
func TestRaftKeyDerivations(t *testing.T) {
	text := randomKeyText(t, RaftKeyLen)
	a, err := ParseRaftKey(text)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := ParseRaftKey(text)
	b, _ := ParseRaftKey(randomKeyText(t, RaftKeyLen))

	if a.Credential() != a2.Credential() || a.Credential() == b.Credential() {
		t.Fatal("the credential is not a function of the key alone")
	}
	raw, _ := base64.StdEncoding.DecodeString(text)
	if cred, _ := base64.RawURLEncoding.DecodeString(a.Credential()); bytes.Contains(cred, raw[:8]) || strings.Contains(a.Credential(), text[:8]) {
		t.Fatal("the credential shows the key")
	}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %s", a, a, a)} {
		if strings.Contains(s, text) || strings.Contains(s, string(raw)) {
			t.Fatalf("printing the key shows it: %q", s)
		}
	}

	cert := func(k *RaftKey) []byte {
		server, client, err := k.TLSConfigs()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(server.Certificates[0].Certificate[0], client.Certificates[0].Certificate[0]) {
			t.Fatal("server and client present different certificates")
		}
		if _, ok := RoleOf(server.Certificates[0].Leaf); ok {
			t.Fatal("the raft key's certificate carries a role")
		}
		return server.Certificates[0].Certificate[0]
	}
	if !bytes.Equal(cert(a), cert(a2)) {
		t.Fatal("one key made two certificates")
	}
	if bytes.Equal(cert(a), cert(b)) {
		t.Fatal("two keys made one certificate")
	}
}
