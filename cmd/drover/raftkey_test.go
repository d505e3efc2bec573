package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-project/drover/internal/devsecrets"
	"github.com/drover-project/drover/security/pki"
)

// A master takes a raft key only where it is the masters' proof to each
// other, tokens without TLS, and there it cannot start without one; a node
// token without TLS needs an API token beside it, since the node token and
// the raft key open the API to nobody. Each refusal is one line saying why
// and what to do, and leaves no data dir.
func TestMasterCredentialRules(t *testing.T) {
	dir := t.TempDir()
	sec, err := devsecrets.Make(filepath.Join(dir, "secrets"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	openKey := filepath.Join(dir, "open.key")
	if err := os.WriteFile(openKey, []byte(devsecrets.RandomKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := []string{"--operator-token-file", sec.OperatorToken, "--submit-token-file", sec.SubmitToken}
	m1, err := sec.Node(pki.RoleMaster, "m1")
	if err != nil {
		t.Fatal(err)
	}
	tlsFiles := []string{"--tls-ca", sec.CA, "--tls-cert", m1.Cert, "--tls-key", m1.Key}
	key := []string{"--raft-key-file", sec.RaftKey}
	// With the gossip key, which such a master needs too, so that the
	// node token is all it lacks.
	node := []string{"--node-token-file", sec.NodeToken, "--gossip-key-file", sec.GossipKey}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		env  string // $DROVER_RAFT_KEY
		want []string
	}{
		{"tokens without TLS or key", tokens, "", []string{"tokens without TLS need --raft-key-file", "drover keygen > raft.key", "append entries"}},
		{"key with TLS", cat(tokens, tlsFiles, key), "", []string{"--raft-key-file is for masters without TLS", "drop the key"}},
		{"key from the environment with TLS", cat(tokens, tlsFiles), devsecrets.RandomKey(), []string{"--raft-key-file is for masters without TLS"}},
		{"key without tokens", key, "", []string{"--raft-key-file is for masters with tokens and no TLS"}},
		{"key open to others", cat(tokens, []string{"--raft-key-file", openKey}), "", []string{"raft key file", "chmod 600"}},
		{"key that is no key", tokens, "c2hvcnQ=", []string{"$DROVER_RAFT_KEY", "raft key is 5 bytes, want 32"}},
		{"node token and key alone", cat(node, key), "", []string{"a node token without TLS needs --operator-token-file or --submit-token-file", "nobody could submit"}},
		{"node token alone", node, "", []string{"a node token without TLS needs --operator-token-file or --submit-token-file"}},
		{"node token and key with open reads", cat(node, key, []string{"--open-reads"}), "", []string{"a node token without TLS needs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DROVER_RAFT_KEY", tc.env)
			data := filepath.Join(t.TempDir(), "data")
			out, code := withStderr(t, func() int {
				return runMaster(append([]string{"--id", "m1", "--data-dir", data, "--bind", "127.0.0.1"}, tc.args...))
			})
			if code != 1 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "drover: ") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and one line", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr %q does not say %q", out, w)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the refused master made its data dir (%v)", err)
			}
		})
	}
}
