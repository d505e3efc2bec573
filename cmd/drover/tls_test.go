package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport/gossip"
)

// cmdFunc is runTLS or runKeygen.
type cmdFunc func(args []string, stdout, stderr *bytes.Buffer) int

func tlsCmd(args []string, stdout, stderr *bytes.Buffer) int { return runTLS(args, stdout, stderr) }
func keygenCmd(args []string, stdout, stderr *bytes.Buffer) int {
	return runKeygen(args, stdout, stderr)
}

// runOK runs a command that must succeed and returns its stdout lines.
func runOK(t *testing.T, cmd cmdFunc, args ...string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := cmd(args, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("%q: exit %d, stderr %q", args, code, errOut.String())
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
}

// runFail runs a command that must fail with exit code 1 and exactly one
// line on stderr containing want, and nothing on stdout.
func runFail(t *testing.T, cmd cmdFunc, want string, args ...string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cmd(args, &out, &errOut)
	msg := errOut.String()
	if code != 1 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") || !strings.Contains(msg, want) {
		t.Fatalf("%q: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", args, code, out.String(), msg, want)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func nearlyIn(t *testing.T, what string, at time.Time, d time.Duration) {
	t.Helper()
	if off := time.Until(at) - d; off < -time.Minute || off > time.Minute {
		t.Errorf("%s expires %v, not %v from now", what, at, d)
	}
}

func TestTLSCommandsMakeAWorkingCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	caPath, caKeyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if got := runOK(t, tlsCmd, "ca", "--dir", dir, "--days", "10", "--name", "Test CA"); !slices.Equal(got, []string{caPath, caKeyPath}) {
		t.Fatalf("tls ca printed %q", got)
	}
	ca := readCert(t, caPath)
	if !ca.IsCA || ca.Subject.CommonName != "Test CA" {
		t.Fatalf("CA: IsCA %v, CN %q", ca.IsCA, ca.Subject.CommonName)
	}
	nearlyIn(t, "the CA", ca.NotAfter, 10*24*time.Hour)
	if mode(t, caKeyPath) != 0o600 || mode(t, caPath) != 0o644 {
		t.Fatalf("modes: ca.pem %v, ca-key.pem %v", mode(t, caPath), mode(t, caKeyPath))
	}

	caFlags := []string{"--ca", caPath, "--ca-key", caKeyPath, "--dir", dir}
	master := runOK(t, tlsCmd, append([]string{"cert", "--role", "master", "--name", "m1", "--host", "10.0.0.1,m1.example.com", "--host", "m1", "--days", "5"}, caFlags...)...)
	if want := []string{filepath.Join(dir, "m1.pem"), filepath.Join(dir, "m1-key.pem")}; !slices.Equal(master, want) {
		t.Fatalf("tls cert printed %q, want %q", master, want)
	}
	mc := readCert(t, master[0])
	if !slices.Equal(mc.DNSNames, []string{"master.drover", "localhost", "m1.example.com", "m1"}) ||
		len(mc.IPAddresses) != 1 || mc.IPAddresses[0].String() != "10.0.0.1" {
		t.Fatalf("master SANs: %q %v", mc.DNSNames, mc.IPAddresses)
	}
	nearlyIn(t, "the master certificate", mc.NotAfter, 5*24*time.Hour)
	if mode(t, master[1]) != 0o600 {
		t.Fatalf("key mode %v", mode(t, master[1]))
	}

	worker := runOK(t, tlsCmd, append([]string{"cert", "--role", "worker", "--name", "w1", "--days", "5"}, caFlags...)...)
	if worker[0] != filepath.Join(dir, "w1.pem") {
		t.Fatalf("--name: %q", worker)
	}
	// --name is the node's ID, in the certificate.
	for path, want := range map[string]string{master[0]: "m1", worker[0]: "w1"} {
		if id, err := pki.IDOf(readCert(t, path)); err != nil || id != want {
			t.Errorf("%s names %q (%v), want %q", path, id, err, want)
		}
	}
	// The default validity outlives this 10-day CA, and Issue refuses a
	// certificate that would: the CLI passes the error on.
	runFail(t, tlsCmd, "after the CA", append([]string{"cert", "--role", "client"}, caFlags...)...)
	client := runOK(t, tlsCmd, append([]string{"cert", "--role", "client", "--days", "1"}, caFlags...)...)
	if id, err := pki.IDOf(readCert(t, client[0])); err != nil || id != "" {
		t.Errorf("the client certificate names %q (%v)", id, err)
	}

	// The files are what pki loads: a master serving workers and clients,
	// a worker and a client dialing it.
	masterFiles := pki.Files{CA: caPath, Cert: master[0], Key: master[1]}
	if _, err := masterFiles.ServerConfig(tls.RequireAndVerifyClientCert, pki.RoleWorker, pki.RoleClient); err != nil {
		t.Fatal(err)
	}
	for _, f := range []pki.Files{{CA: caPath, Cert: worker[0], Key: worker[1]}, {CA: caPath, Cert: client[0], Key: client[1]}} {
		if _, err := f.ClientConfig(pki.RoleMaster); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTLSCommandsNeverOverwrite(t *testing.T) {
	dir := t.TempDir()
	ca := runOK(t, tlsCmd, "ca", "--dir", dir)
	caFlags := []string{"--ca", ca[0], "--ca-key", ca[1], "--dir", dir}
	cert := runOK(t, tlsCmd, append([]string{"cert", "--role", "worker", "--name", "w1"}, caFlags...)...)
	before := map[string][]byte{}
	for _, p := range append(ca, cert...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = b
	}
	runFail(t, tlsCmd, "refusing to overwrite", "ca", "--dir", dir)
	runFail(t, tlsCmd, "refusing to overwrite", append([]string{"cert", "--role", "worker", "--name", "w1"}, caFlags...)...)
	for p, b := range before {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, b) {
			t.Fatalf("%s changed", p)
		}
	}
}

// --ca and --ca-key default to the CA in --dir, as the commands of
// docs/security.md rely on.
func TestTLSCertFindsTheCAInDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	runOK(t, tlsCmd, "ca", "--dir", dir)
	got := runOK(t, tlsCmd, "cert", "--dir", dir, "--role", "master", "--name", "m1", "--host", "10.0.0.1")
	if want := []string{filepath.Join(dir, "m1.pem"), filepath.Join(dir, "m1-key.pem")}; !slices.Equal(got, want) {
		t.Fatalf("tls cert printed %q, want %q", got, want)
	}
	if _, err := (pki.Files{CA: filepath.Join(dir, "ca.pem"), Cert: got[0], Key: got[1]}).ServerConfig(tls.NoClientCert); err != nil {
		t.Fatal(err)
	}
	// An explicit --ca wins over the one in --dir.
	other := t.TempDir()
	runFail(t, tlsCmd, filepath.Join(other, "ca.pem"), "cert", "--dir", dir, "--role", "worker", "--name", "w1", "--ca", filepath.Join(other, "ca.pem"))
}

// Without --dir, --ca and --ca-key everything happens in the working
// directory.
func TestTLSCommandDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if got := runOK(t, tlsCmd, "ca"); !slices.Equal(got, []string{"ca.pem", "ca-key.pem"}) {
		t.Fatalf("tls ca printed %q", got)
	}
	nearlyIn(t, "the CA", readCert(t, "ca.pem").NotAfter, 1825*24*time.Hour)
	if got := runOK(t, tlsCmd, "cert", "--role", "client"); !slices.Equal(got, []string{"drover-client.pem", "drover-client-key.pem"}) {
		t.Fatalf("tls cert printed %q", got)
	}
	c := readCert(t, "drover-client.pem")
	nearlyIn(t, "the certificate", c.NotAfter, 365*24*time.Hour)
	if r, ok := pki.RoleOf(c); !ok || r != pki.RoleClient {
		t.Fatalf("role %q %v", r, ok)
	}
}

func TestTLSCommandErrors(t *testing.T) {
	dir := t.TempDir()
	ca := runOK(t, tlsCmd, "ca", "--dir", dir, "--days", "30")
	caFlags := []string{"--ca", ca[0], "--ca-key", ca[1], "--dir", dir}
	missing := filepath.Join(dir, "nothing.pem")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"sign"}, `unknown command "sign"`},
		{"unknown flag", []string{"ca", "--bits", "4096"}, "unknown flag: --bits"},
		{"arguments", []string{"ca", "extra"}, "no arguments"},
		{"zero days", []string{"ca", "--dir", dir, "--days", "0"}, "--days 0"},
		{"overflowing days", []string{"ca", "--dir", dir, "--days", "200000"}, "--days 200000"},
		{"days not a number", []string{"ca", "--days", "ten"}, "--days"},
		{"no role", append([]string{"cert"}, caFlags...), "--role is required"},
		{"unknown role", append([]string{"cert", "--role", "admin"}, caFlags...), "master, worker or client"},
		{"missing CA", []string{"cert", "--role", "master", "--name", "m1", "--ca", missing, "--ca-key", ca[1], "--dir", dir}, missing},
		{"missing CA key", []string{"cert", "--role", "master", "--name", "m1", "--ca", ca[0], "--ca-key", missing, "--dir", dir}, missing},
		{"CA and key swapped", []string{"cert", "--role", "master", "--name", "m1", "--ca", ca[1], "--ca-key", ca[0], "--dir", dir}, "CERTIFICATE"},
		{"a host that passes for another role", append([]string{"cert", "--role", "worker", "--name", "w1", "--host", "*.drover"}, caFlags...), "pass for a master"},
		{"a host with a port", append([]string{"cert", "--role", "master", "--name", "m1", "--host", "m1:7102"}, caFlags...), "not a DNS name"},
		{"a master without its ID", append([]string{"cert", "--role", "master", "--days", "1"}, caFlags...), "--name is required for a master certificate"},
		{"a worker without its ID", append([]string{"cert", "--role", "worker", "--days", "1"}, caFlags...), "--name is required for a worker certificate"},
		{"a name that is a path", append([]string{"cert", "--role", "master", "--name", "../m1", "--days", "1"}, caFlags...), "master ID"},
		{"a worker name that is no worker ID", append([]string{"cert", "--role", "worker", "--name", "w 1", "--days", "1"}, caFlags...), "worker ID"},
		{"a client name that is a path", append([]string{"cert", "--role", "client", "--name", "../c1", "--days", "1"}, caFlags...), "plain name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runFail(t, tlsCmd, tc.want, tc.args...)
		})
	}
	// Failures wrote nothing.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("files after failures: %v", entries)
	}
}

func TestTLSHelp(t *testing.T) {
	cases := []struct {
		cmd  cmdFunc
		args []string
		want string
	}{
		{tlsCmd, []string{"--help"}, "usage: drover tls <command>"},
		{tlsCmd, []string{"help"}, "usage: drover tls <command>"},
		{tlsCmd, []string{"ca", "--help"}, "--days"},
		{tlsCmd, []string{"cert", "-h"}, "--role"},
		{keygenCmd, []string{"--help"}, "usage: drover keygen\n"},
	}
	for _, tc := range cases {
		var out, errOut bytes.Buffer
		if code := tc.cmd(tc.args, &out, &errOut); code != 0 || errOut.Len() != 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 0 and %q on stdout", tc.args, code, errOut.String(), out.String(), tc.want)
		}
	}
}

func TestKeygen(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		lines := runOK(t, keygenCmd)
		if len(lines) != 1 {
			t.Fatalf("keygen printed %q", lines)
		}
		k := lines[0]
		raw, err := base64.StdEncoding.DecodeString(k)
		if err != nil || len(raw) != 32 {
			t.Fatalf("keygen printed %q: %d bytes, %v", k, len(raw), err)
		}
		if _, err := gossip.ParseKey(k); err != nil {
			t.Fatalf("not a gossip key: %v", err)
		}
		if err := auth.CheckToken(k); err != nil {
			t.Fatalf("not a token: %v", err)
		}
		if seen[k] {
			t.Fatal("keygen repeated a key")
		}
		seen[k] = true
	}
	runFail(t, keygenCmd, "no arguments", "extra")
}

// run hands tls and keygen to their commands: exit 1 for their own usage
// errors, where an unknown command would exit 2.
func TestTLSAndKeygenAreCommands(t *testing.T) {
	if code := run([]string{"tls", "sign"}); code != 1 {
		t.Fatalf("drover tls sign: exit %d, want 1", code)
	}
	if code := run([]string{"keygen", "extra"}); code != 1 {
		t.Fatalf("drover keygen extra: exit %d, want 1", code)
	}
}
