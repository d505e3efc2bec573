package transport

import (
	"crypto/tls"
	"errors"
	"net/http"
	"time"
)

// NewHTTPClient returns an HTTP client whose connections leave from bindIP.
// timeout bounds a whole request, body included; 0 means no bound (for long
// polls and log streams, which carry their own context deadline). A non-nil
// tlsConf is used for https:// URLs (package pki makes one).
func NewHTTPClient(bindIP string, timeout time.Duration, tlsConf *tls.Config) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 5 * time.Second,
		Proxy:               nil,
		DialContext:         Dialer(bindIP, 5*time.Second).DialContext,
		// As many as the submissions one busy client (or a follower
		// forwarding them) keeps in flight to one master: a connection
		// over the bound is closed after its request and dialed again
		// for the next.
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// RootCause returns the innermost error err wraps: what a failed request
// says without net/http's "Post \"http://...\":" prefix and the like,
// which repeat what the caller already knows.
func RootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
