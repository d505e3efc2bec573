// Package devsecrets makes the throwaway credentials of a development or
// test cluster: a CA, a gossip key, the operator, submit and node tokens
// and a raft key, each in a file of one 0700 directory, and a certificate for
// each master and worker, naming its ID, issued when the node is first
// asked for; and the flags that hand them to nodes. Production clusters
// make theirs with drover tls and drover keygen (docs/security.md).
package devsecrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-project/drover/security/pki"
)

// Secrets are the paths of a cluster's credential files.
type Secrets struct {
	Dir string
	// CA is the CA's certificate and CAKey its key, which issues the
	// nodes' certificates (Node).
	CA, CAKey string
	GossipKey string
	// OperatorToken, SubmitToken and NodeToken are the token files.
	OperatorToken, SubmitToken, NodeToken string
	// RaftKey is for masters run with tokens and no TLS (Args).
	RaftKey string
	// host is the address every node certificate is valid for.
	host string
}

// Validity is how long the node certificates last; the CA a day longer.
const Validity = 30 * 24 * time.Hour

// Make creates dir (0700) and writes a fresh CA, a gossip key, three
// tokens and a raft key; node certificates, valid for bindIP, come from
// Node. It refuses to replace files that exist.
func Make(dir, bindIP string) (Secrets, error) {
	s := Secrets{Dir: dir, host: bindIP}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, err
	}
	caCert, caKey, err := pki.NewCA("drover dev CA", Validity+24*time.Hour)
	if err != nil {
		return s, err
	}
	if s.CA, s.CAKey, err = pki.WriteFiles(dir, "ca", caCert, caKey); err != nil {
		return s, err
	}
	for _, v := range []struct {
		name string
		path *string
	}{{"gossip.key", &s.GossipKey}, {"operator.token", &s.OperatorToken}, {"submit.token", &s.SubmitToken}, {"node.token", &s.NodeToken}, {"raft.key", &s.RaftKey}} {
		*v.path = filepath.Join(dir, v.name)
		if err := writeNew(*v.path, RandomKey()); err != nil {
			return s, err
		}
	}
	return s, nil
}

// issuing serialises Node, so that two callers asking for one node's
// certificate at once share one pair of files.
var issuing sync.Mutex

// Node returns the TLS files of node id of role (master or worker): the
// CA, and the node's own certificate naming id (pki.Issue), valid for the
// address Make was given, in DIR/ROLE-ID.pem and DIR/ROLE-ID-key.pem. The
// first call for a node issues them; later calls return the same files.
func (s Secrets) Node(role pki.Role, id string) (pki.Files, error) {
	issuing.Lock()
	defer issuing.Unlock()
	name := string(role) + "-" + id
	f := pki.Files{CA: s.CA, Cert: filepath.Join(s.Dir, name+".pem"), Key: filepath.Join(s.Dir, name+"-key.pem")}
	if _, err := os.Stat(f.Key); err == nil {
		return f, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	caCert, err := os.ReadFile(s.CA)
	if err != nil {
		return f, err
	}
	caKey, err := os.ReadFile(s.CAKey)
	if err != nil {
		return f, err
	}
	cert, key, err := pki.Issue(caCert, caKey, role, id, []string{s.host}, Validity)
	if err != nil {
		return f, err
	}
	if f.Cert, f.Key, err = pki.WriteFiles(s.Dir, name, cert, key); err != nil {
		return f, err
	}
	return f, nil
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

// Args are the flags that hand node id of role (master or worker) its
// credentials, and the gossip key. With tls: the CA and the node's own
// certificate (Node). Without: the node token, and a master's raft key,
// which masters prove themselves to each other with there. Masters get the
// operator and submit tokens besides; a worker never gets the operator
// token.
func (s Secrets) Args(role pki.Role, id string, tls bool) ([]string, error) {
	args := []string{"--gossip-key-file", s.GossipKey}
	switch {
	case tls:
		f, err := s.Node(role, id)
		if err != nil {
			return nil, err
		}
		args = append(args, "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key)
	case role == pki.RoleMaster:
		args = append(args, "--node-token-file", s.NodeToken, "--raft-key-file", s.RaftKey)
	default:
		args = append(args, "--node-token-file", s.NodeToken)
	}
	if role == pki.RoleMaster {
		args = append(args, "--operator-token-file", s.OperatorToken, "--submit-token-file", s.SubmitToken)
	}
	return args, nil
}
