package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/pki"
)

// nodeSecurity is what a master or worker needs to be closed to outsiders:
// its TLS files, its tokens and the gossip key.
type nodeSecurity struct {
	TLS                        pki.Files
	OperatorToken, SubmitToken string
	// Token is a worker's own token (the operator token), used only
	// when the masters have tokens but no TLS.
	Token     string
	GossipKey []byte
	Insecure  bool
}

// envOr returns $name, or def when it is unset, as the default of a flag:
// every security setting may come from the environment (DROVER_*), which,
// unlike a flag, does not show in ps.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// addSecurityFlags adds the TLS, token and gossip-key flags of a master
// (master true) or a worker to fs; the returned function reads the files
// and variables they name once fs is parsed. Secrets are read from files
// or the environment only, never from a flag's value, with one exception
// kept for memberlist users: --gossip-key, which warns that ps shows it.
func addSecurityFlags(fs *pflag.FlagSet, master bool) func() (nodeSecurity, error) {
	var s nodeSecurity
	fs.StringVar(&s.TLS.CA, "tls-ca", envOr("DROVER_TLS_CA", ""), "PEM file of the cluster CA (drover tls ca); with --tls-cert and --tls-key turns on mutual TLS [$DROVER_TLS_CA]")
	fs.StringVar(&s.TLS.Cert, "tls-cert", envOr("DROVER_TLS_CERT", ""), "PEM file of this node's certificate, signed by the CA for its role (drover tls cert) [$DROVER_TLS_CERT]")
	fs.StringVar(&s.TLS.Key, "tls-key", envOr("DROVER_TLS_KEY", ""), "PEM file of this node's private key [$DROVER_TLS_KEY]")
	var operatorFile, submitFile, tokenFile *string
	if master {
		operatorFile = fs.String("operator-token-file", envOr("DROVER_OPERATOR_TOKEN_FILE", ""), "file holding the operator token, which may do everything [$DROVER_OPERATOR_TOKEN_FILE, or the token itself in $DROVER_OPERATOR_TOKEN]")
		submitFile = fs.String("submit-token-file", envOr("DROVER_SUBMIT_TOKEN_FILE", ""), "file holding the submit token, which may submit, kill and read [$DROVER_SUBMIT_TOKEN_FILE, or $DROVER_SUBMIT_TOKEN]")
	} else {
		tokenFile = fs.String("token-file", envOr(client.EnvTokenFile, ""), "file holding the operator token; needed only when the masters use tokens without TLS [$DROVER_TOKEN_FILE, or $DROVER_TOKEN]")
	}
	keyFile := fs.String("gossip-key-file", envOr("DROVER_GOSSIP_KEY_FILE", ""), "file holding the base64 gossip encryption key (drover keygen) [$DROVER_GOSSIP_KEY_FILE]")
	key := fs.String("gossip-key", "", "the base64 gossip encryption key itself; shows in ps, so prefer --gossip-key-file or $DROVER_GOSSIP_KEY")
	fs.BoolVar(&s.Insecure, "insecure", false, "allow listening on an address other than loopback with neither TLS nor tokens")
	return func() (nodeSecurity, error) {
		var err error
		if master {
			if s.OperatorToken, err = auth.LoadToken(*operatorFile, "DROVER_OPERATOR_TOKEN"); err != nil {
				return s, fmt.Errorf("operator %w", err)
			}
			if s.SubmitToken, err = auth.LoadToken(*submitFile, "DROVER_SUBMIT_TOKEN"); err != nil {
				return s, fmt.Errorf("submit %w", err)
			}
		} else if s.Token, err = auth.LoadToken(*tokenFile, client.EnvToken); err != nil {
			return s, err
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
