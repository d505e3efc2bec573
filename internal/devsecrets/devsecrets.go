// Package devsecrets makes the throwaway credentials of a development or
// test cluster: a CA, a master and a worker certificate, a gossip key, the
// operator and submit tokens and a raft key, each in a file of one 0700
// directory, and the flags that hand them to nodes. Production clusters make theirs with
// drover tls and drover keygen (docs/security.md).
package devsecrets

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-project/drover/pki"
)

// Secrets are the paths of a cluster's credential files.
type Secrets struct {
	Dir                        string
	CA                         string
	Master, Worker             pki.Files
	GossipKey                  string
	OperatorToken, SubmitToken string
	// RaftKey is for masters run with tokens and no TLS (TokenMasterArgs).
	RaftKey string
}

// Validity is how long the node certificates last; the CA a day longer.
const Validity = 30 * 24 * time.Hour

// Make creates dir (0700) and writes a fresh CA, master and worker
// certificates valid for bindIP, a gossip key, two tokens and a raft key.
// It refuses to replace files that exist.
func Make(dir, bindIP string) (Secrets, error) {
	s := Secrets{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, err
	}
	caCert, caKey, err := pki.NewCA("drover dev CA", Validity+24*time.Hour)
	if err != nil {
		return s, err
	}
	if s.CA, _, err = pki.WriteFiles(dir, "ca", caCert, caKey); err != nil {
		return s, err
	}
	for _, n := range []struct {
		role pki.Role
		f    *pki.Files
	}{{pki.RoleMaster, &s.Master}, {pki.RoleWorker, &s.Worker}} {
		cert, key, err := pki.Issue(caCert, caKey, n.role, []string{bindIP}, Validity)
		if err != nil {
			return s, err
		}
		n.f.CA = s.CA
		if n.f.Cert, n.f.Key, err = pki.WriteFiles(dir, string(n.role), cert, key); err != nil {
			return s, err
		}
	}
	for _, v := range []struct {
		name string
		path *string
	}{{"gossip.key", &s.GossipKey}, {"operator.token", &s.OperatorToken}, {"submit.token", &s.SubmitToken}, {"raft.key", &s.RaftKey}} {
		*v.path = filepath.Join(dir, v.name)
		if err := writeNew(*v.path, RandomKey()); err != nil {
			return s, err
		}
	}
	return s, nil
}

// RandomKey is 32 random bytes in base64: a gossip key (AES-256), a raft
// key and a token alike.
func RandomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return base64.StdEncoding.EncodeToString(b)
}

// writeNew writes a secret to a new 0600 file, refusing to replace one.
func writeNew(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// MasterArgs are the drover master flags that hand a master its
// credentials, TLS included.
func (s Secrets) MasterArgs() []string {
	return append([]string{"--tls-ca", s.CA, "--tls-cert", s.Master.Cert, "--tls-key", s.Master.Key}, s.tokenArgs()...)
}

// WorkerArgs are the drover worker flags that hand a worker its
// credentials, TLS included.
func (s Secrets) WorkerArgs() []string {
	return []string{"--tls-ca", s.CA, "--tls-cert", s.Worker.Cert, "--tls-key", s.Worker.Key, "--gossip-key-file", s.GossipKey}
}

// TokenMasterArgs are the drover master flags of a cluster without TLS:
// the tokens, the gossip key and the raft key the masters prove
// themselves to each other with.
func (s Secrets) TokenMasterArgs() []string {
	return append(s.tokenArgs(), "--raft-key-file", s.RaftKey)
}

// TokenWorkerArgs are the drover worker flags of a cluster without TLS:
// the operator token, which workers prove themselves with there, and the
// gossip key.
func (s Secrets) TokenWorkerArgs() []string {
	return []string{"--operator-token-file", s.OperatorToken, "--gossip-key-file", s.GossipKey}
}

// tokenArgs hand a master its tokens and the gossip key.
func (s Secrets) tokenArgs() []string {
	return []string{"--operator-token-file", s.OperatorToken, "--submit-token-file", s.SubmitToken, "--gossip-key-file", s.GossipKey}
}
