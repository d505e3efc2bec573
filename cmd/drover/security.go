package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport/gossip"
)

// nodeSecurity is what a master or worker needs to be closed to outsiders:
// its TLS files, its tokens, the gossip key and, for a master without TLS,
// the raft key.
type nodeSecurity struct {
	TLS pki.Files
	// OperatorToken and SubmitToken are a master's alone; NodeToken is
	// on masters and workers, used when the cluster has tokens but no
	// TLS.
	OperatorToken, SubmitToken, NodeToken string
	GossipKey                             []byte
	RaftKey                               *pki.RaftKey
	Insecure                              bool
	// AllowedHosts are the names an open node answers to beside its
	// own address and loopback's (transport.Gate).
	AllowedHosts []string
}

// errWorkerOperatorToken refuses a worker given the operator token: a
// worker's programs could reach it, and with it everything.
var errWorkerOperatorToken = errors.New("workers no longer take the operator token (--operator-token-file, $DROVER_OPERATOR_TOKEN_FILE, $DROVER_OPERATOR_TOKEN): " +
	"give this worker the node token instead, with --node-token-file or $DROVER_NODE_TOKEN_FILE, and the masters the same one (docs/security.md)")

// addSecurityFlags adds the TLS, token and gossip-key flags of a master
// (master true) or a worker to fs; the returned function reads the files
// and variables they name once fs is parsed. Secrets are read from files
// or the environment only, never from a flag's value, with one exception
// kept for memberlist users: --gossip-key, which warns that ps shows it.
// A worker keeps --operator-token-file, hidden, only to refuse it with
// errWorkerOperatorToken, which names the node token.
func addSecurityFlags(fs *pflag.FlagSet, master bool) func() (nodeSecurity, error) {
	var s nodeSecurity
	fs.StringVar(&s.TLS.CA, "tls-ca", "", "PEM file of the cluster CA (drover tls ca); with --tls-cert and --tls-key turns on mutual TLS [$DROVER_TLS_CA]")
	fs.StringVar(&s.TLS.Cert, "tls-cert", "", "PEM file of this node's certificate, signed by the CA for its role and naming its --id (drover tls cert --role ROLE --name ID) [$DROVER_TLS_CERT]")
	fs.StringVar(&s.TLS.Key, "tls-key", "", "PEM file of this node's private key [$DROVER_TLS_KEY]")
	// Tokens are read from these flags and variables, never from the
	// client's DROVER_TOKEN*.
	operatorFile := fs.String("operator-token-file", "", "file holding the operator token, which may do everything [$DROVER_OPERATOR_TOKEN_FILE, or the token itself in $DROVER_OPERATOR_TOKEN]")
	var submitFile, raftKeyFile *string
	if master {
		submitFile = fs.String("submit-token-file", "", "file holding the submit token, which may submit, kill and read [$DROVER_SUBMIT_TOKEN_FILE, or $DROVER_SUBMIT_TOKEN]")
		raftKeyFile = fs.String("raft-key-file", "", "file holding the raft key (drover keygen), the same on every master, by which masters without TLS prove themselves to each other on the Raft port and over HTTP; required with tokens and no TLS, refused otherwise [$DROVER_RAFT_KEY_FILE, or the key itself in $DROVER_RAFT_KEY]")
	} else {
		_ = fs.MarkHidden("operator-token-file")
	}
	nodeFile := fs.String("node-token-file", "", "file holding the node token, shared by masters and workers when they use tokens without TLS: workers present it for their own traffic and upload reads, masters to workers' logs; it grants nothing else, so a master without TLS needs the operator or submit token beside it (drover keygen) [$DROVER_NODE_TOKEN_FILE, or $DROVER_NODE_TOKEN]")
	keyFile := fs.String("gossip-key-file", "", "file holding the base64 gossip encryption key (drover keygen) [$DROVER_GOSSIP_KEY_FILE]")
	key := fs.String("gossip-key", "", "the base64 gossip encryption key itself; shows in ps, so prefer --gossip-key-file or $DROVER_GOSSIP_KEY")
	fs.BoolVar(&s.Insecure, "insecure", false, "allow listening on an address other than loopback with neither TLS nor tokens")
	fs.StringSliceVar(&s.AllowedHosts, "allowed-hosts", nil, "comma-separated host names (no port) this node answers to beside its --bind address, localhost, 127.0.0.1 and [::1] while it needs no credential (no TLS, and no tokens or, on a master, --open-reads); other Host headers get 421 (DNS rebinding; docs/security.md)")
	return func() (nodeSecurity, error) {
		var err error
		if master {
			if s.OperatorToken, err = auth.LoadToken(*operatorFile, "DROVER_OPERATOR_TOKEN"); err != nil {
				return s, fmt.Errorf("operator %w", err)
			}
			if s.SubmitToken, err = auth.LoadToken(*submitFile, "DROVER_SUBMIT_TOKEN"); err != nil {
				return s, fmt.Errorf("submit %w", err)
			}
			if s.RaftKey, err = pki.LoadRaftKey(*raftKeyFile, "DROVER_RAFT_KEY"); err != nil {
				return s, err
			}
		} else if *operatorFile != "" || os.Getenv("DROVER_OPERATOR_TOKEN") != "" {
			// Before the file is read: the refusal names the
			// replacement, not whatever is wrong with the file.
			return s, errWorkerOperatorToken
		}
		if s.NodeToken, err = auth.LoadToken(*nodeFile, "DROVER_NODE_TOKEN"); err != nil {
			return s, fmt.Errorf("node %w", err)
		}
		s.GossipKey, err = loadGossipKey(*key, *keyFile)
		return s, err
	}
}

// loadGossipKey takes the key from flag, from file, or from
// $DROVER_GOSSIP_KEY, in that order; nil when none is set.
func loadGossipKey(flag, file string) ([]byte, error) {
	v, from := flag, "--gossip-key"
	switch {
	case v != "" && file != "":
		return nil, errors.New("give --gossip-key or --gossip-key-file, not both")
	case v == "" && file != "":
		if err := pki.CheckPrivate(file); err != nil {
			return nil, fmt.Errorf("gossip key: %w", err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("gossip key: %w", err)
		}
		v, from = strings.TrimSpace(string(b)), file
	case v == "":
		v, from = os.Getenv("DROVER_GOSSIP_KEY"), "$DROVER_GOSSIP_KEY"
	}
	if v == "" {
		return nil, nil
	}
	k, err := gossip.ParseKey(v)
	if err != nil {
		return nil, fmt.Errorf("gossip key from %s: %w", from, err)
	}
	return k, nil
}
