package pki

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"
)

// RaftKey is the secret the masters of a cluster without TLS share, so
// that they can prove to each other that they are its masters: on the
// Raft port (TLS) and over HTTP (Credential). It is RaftKeyLen random
// bytes, written in standard base64 as drover keygen prints them. Every
// use takes a key of its own from it (HKDF-SHA256, RFC 5869, with a label
// per use), so that what one use shows a peer tells nothing of the others
// or of the raft key: the HTTP credential, which crosses the network as a
// bearer token does, opens no Raft port.
type RaftKey struct{ secret []byte }

// RaftKeyLen is the length of a raft key in bytes: 256 bits, as drover
// keygen makes.
const RaftKeyLen = 32

// NewRaftKey returns a fresh random raft key.
func NewRaftKey() *RaftKey {
	k := &RaftKey{secret: make([]byte, RaftKeyLen)}
	_, _ = rand.Read(k.secret) // crypto/rand.Read never fails
	return k
}

// ParseRaftKey reads a raft key in standard base64, whitespace around it
// ignored. Errors name the problem, never the input.
func ParseRaftKey(s string) (*RaftKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		// The decoder's error gives only an offset, never the input.
		return nil, fmt.Errorf("raft key is not standard base64 (drover keygen makes one): %w", err)
	}
	if len(b) != RaftKeyLen {
		return nil, fmt.Errorf("raft key is %d bytes, want %d (drover keygen makes one)", len(b), RaftKeyLen)
	}
	return &RaftKey{secret: b}, nil
}

// LoadRaftKey reads a raft key from file or, when file is "", from the
// environment variable env (see ReadSecret). nil with a nil error means
// neither was given.
func LoadRaftKey(file, env string) (*RaftKey, error) {
	s, from, err := ReadSecret(file, env)
	if err != nil {
		return nil, fmt.Errorf("raft key file: %w", err)
	}
	if s == "" {
		return nil, nil
	}
	k, err := ParseRaftKey(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return k, nil
}

// ReadSecret returns a secret (a token or a key) from file, which must be
// private to its owner (CheckPrivate), or, when file is "", from the
// environment variable env, with the whitespace around it trimmed; from
// names where it came from, for errors. "" with a nil error means neither
// was given; an empty file is an error. A secret never comes from a flag's
// value, which any user of the machine can read in ps.
func ReadSecret(file, env string) (secret, from string, err error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), "$" + env, nil
	}
	if err := CheckPrivate(file); err != nil {
		return "", file, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", file, err
	}
	if secret = strings.TrimSpace(string(b)); secret == "" {
		return "", file, fmt.Errorf("%s is empty", file)
	}
	return secret, file, nil
}

// String keeps the key out of logs and errors should one be printed.
func (k *RaftKey) String() string { return "raft key (not shown)" }

// derive returns 32 bytes of the key for one use, named by label.
func (k *RaftKey) derive(label string) []byte {
	// hkdf.Key fails only for a length past 255 hashes; this is one.
	b, _ := hkdf.Key(sha256.New, k.secret, nil, "drover raft key: "+label, sha256.Size)
	return b
}

// Credential is what a master without TLS presents to the other masters
// over HTTP (api.HeaderMasterCredential), as a master certificate does with
// TLS: 32 bytes of the key in unpadded base64url. It is the same on every
// master holding the key and cannot be turned back into the key.
func (k *RaftKey) Credential() string {
	return base64.RawURLEncoding.EncodeToString(k.derive("master credential v1"))
}

// raftKeyName is the one DNS name of the certificate a raft key makes; it
// names no role, so no CA's role check can take it for a node.
const raftKeyName = "raft-key.drover"

// TLSConfigs returns the TLS server and client configurations of a Raft
// port keyed by k: TLS 1.3, where each side presents a certificate of an
// Ed25519 key taken from k and accepts only a peer that presents the same
// one. The certificate is its own and only CA, so crypto/tls's ordinary
// verification does the check, and each side proves it holds the private
// key by signing the handshake's transcript, which both sides' fresh
// randoms enter (RFC 8446, 4.4.3), in a context that differs between
// client and server: a recorded handshake cannot be replayed, nor one
// side's proof passed off as the other's. This is what TLS-PSK would give,
// which crypto/tls lacks. Sessions are never resumed, so every connection
// proves the key afresh. Unlike a challenge-response in front of plain
// TCP, every byte after the handshake is encrypted and authenticated, so
// nobody on the path can read the log or slip an RPC into a connection.
//
// The certificate's validity is fixed (2000 to 9999) rather than counted
// from the moment it is made, so every master makes the very same one.
func (k *RaftKey) TLSConfigs() (server, client *tls.Config, err error) {
	priv := ed25519.NewKeyFromSeed(k.derive("raft TLS identity v1"))
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: raftKeyName},
		DNSNames:              []string{raftKeyName},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, nil, fmt.Errorf("raft key certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("raft key certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}
	server = &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{cert},
		ClientCAs:              pool,
		ClientAuth:             tls.RequireAndVerifyClientCert,
		SessionTicketsDisabled: true,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   raftKeyName,
	}
	return server, client, nil
}
