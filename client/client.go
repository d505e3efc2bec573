// Package client talks to a Drover master quorum over HTTP. Like Spark's
// tryRegisterAllMasters, it sends each request to every master at once and
// takes the first authoritative answer: a success, or a refusal that only the
// leader could give. Answers that say "no leader here" (503) or "too busy"
// (429, but for api.CodeLimitReached) and connection failures are not
// authoritative; the client then tries again in rounds until its context
// ends.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport"
)

// ErrNoMaster is returned, wrapped with the last reason seen, when no
// master gave an authoritative answer before the context ended: none could
// be reached, or none knew a leader. It is the client's own conclusion
// after trying them all, unlike api.ErrUnavailable, which is one master's
// answer (503) that it cannot serve the request now.
var ErrNoMaster = errors.New("no master answered with a leader")

// APIError is an authoritative refusal: a 4xx other than 429 (400, 413
// and 431 among them: every master would refuse the request alike), a
// 429 that says a bound of the cluster is reached (api.CodeLimitReached:
// retrying at once cannot help), a 5xx other than 503, or, with Status
// 0, a TLS handshake that failed on a certificate, an answer past
// Options.MaxResponseBytes or a request past api.MaxHeaderBytes, which
// is never sent.
// It wraps the sentinel error of its code, so a caller asks
// errors.Is(err, model.ErrUnknownDriver) or errors.Is(err,
// api.ErrForbidden) rather than look at the status.
type APIError struct {
	Status  int
	Code    api.Code
	Message string
	err     error
}

// Error returns the master's message.
func (e *APIError) Error() string { return e.Message }

// Unwrap returns the sentinel error of the refusal's code (package api or
// model); nil for a refused TLS handshake.
func (e *APIError) Unwrap() error { return e.err }

// refusal makes the APIError of an answer with status and body.
func refusal(status int, body []byte, msg string) *APIError {
	var e api.Error
	_ = json.Unmarshal(body, &e)
	e.Error = msg
	return &APIError{Status: status, Code: e.Code, Message: msg, err: errors.Unwrap(e.Err(status))}
}

// DefaultMaxResponseBytes is Options.MaxResponseBytes when unset: 64 MiB.
const DefaultMaxResponseBytes = 64 << 20

// Options tune a Client. The zero value is usable.
type Options struct {
	// BindIP is the source address of every connection ("" lets the
	// kernel choose).
	BindIP string
	// RequestTimeout bounds one request to one master (default 10s).
	RequestTimeout time.Duration
	// RetryInterval is the pause between rounds when no master answered
	// authoritatively (default 100ms); it doubles after each round up to
	// MaxRetryInterval (default 1s).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// Sticky sends each request first to the master that answered last,
	// and to all masters once it fails or HedgeAfter passes without an
	// answer. Workers use it for their steady heartbeat; the CLI fans out
	// every time.
	Sticky bool
	// HedgeAfter is how long a sticky request waits for the preferred
	// master before it is also sent to the others (default 3s: longer than
	// a master holds a heartbeat long poll).
	HedgeAfter time.Duration
	// MaxResponseBytes bounds a response body (default
	// DefaultMaxResponseBytes): a longer one is an *APIError wrapping
	// api.ErrTooLarge that names the bound, never an answer cut short.
	// Lists come in pages (ListDrivers), each its own answer.
	MaxResponseBytes int64
	// TLS, when set, makes every request HTTPS with this config (package
	// pki's Files.ClientConfig(pki.RoleMaster) trusts only the cluster CA
	// and checks that the server holds a master certificate).
	TLS *tls.Config
	// Token is sent as "Authorization: Bearer <Token>" when not "".
	Token string
	// Namespace is the namespace Submit submits into when the request
	// names none ("" for the masters' default, `default`).
	Namespace string
	// NoBatching sends every Submit as a request of its own, instead of
	// gathering the submissions made while others are out into batch
	// requests.
	NoBatching bool
}

// Environment variables that OptionsFromEnv reads; a driver's worker sets
// DROVER_CACERT and DROVER_TOKEN for it.
const (
	EnvCACert     = "DROVER_CACERT"
	EnvClientCert = "DROVER_CLIENT_CERT"
	EnvClientKey  = "DROVER_CLIENT_KEY"
	EnvToken      = "DROVER_TOKEN"
	EnvTokenFile  = "DROVER_TOKEN_FILE"
	// EnvNamespace names the namespace to submit into and list
	// (Options.Namespace).
	EnvNamespace = "DROVER_NAMESPACE"
)

// OptionsFromEnv returns Options with TLS and Token taken from the
// environment: the cluster CA from $DROVER_CACERT, an optional client
// certificate from $DROVER_CLIENT_CERT and $DROVER_CLIENT_KEY, and the
// token from the file $DROVER_TOKEN_FILE or else $DROVER_TOKEN, and the
// namespace from $DROVER_NAMESPACE. Unset variables leave plain HTTP, no
// token and the default namespace. Errors name the variable and never
// repeat a token.
func OptionsFromEnv() (Options, error) {
	o, err := SecureOptions(os.Getenv(EnvCACert), os.Getenv(EnvClientCert), os.Getenv(EnvClientKey), os.Getenv(EnvTokenFile))
	o.Namespace = os.Getenv(EnvNamespace)
	return o, err
}

// SecureOptions is OptionsFromEnv with the file names given: caFile ("" for
// plain HTTP), an optional client certificate and key, and a token file
// ("" reads $DROVER_TOKEN instead).
func SecureOptions(caFile, certFile, keyFile, tokenFile string) (Options, error) {
	var o Options
	if caFile != "" || certFile != "" || keyFile != "" {
		if caFile == "" {
			return o, errors.New("a client certificate needs the cluster CA too ($DROVER_CACERT or --ca-cert)")
		}
		c, err := pki.Files{CA: caFile, Cert: certFile, Key: keyFile}.ClientConfig(pki.RoleMaster)
		if err != nil {
			return o, err
		}
		o.TLS = c
	}
	tok, err := auth.LoadToken(tokenFile, EnvToken)
	if err != nil {
		return o, err
	}
	o.Token = tok
	return o, nil
}

// Client is safe for concurrent use.
type Client struct {
	masters []string
	opts    Options
	scheme  string
	http    *http.Client

	mu        sync.Mutex
	preferred string

	submits submitter
	scheduleCalls
}

// New returns a client for the given masters, each host:port of a master's
// HTTP listener (an http:// or https:// prefix is accepted and ignored:
// Options.TLS decides the scheme).
func New(masters []string, opts Options) (*Client, error) {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 100 * time.Millisecond
	}
	if opts.MaxRetryInterval < opts.RetryInterval {
		opts.MaxRetryInterval = max(api.DefaultMaxRetryInterval, opts.RetryInterval)
	}
	if opts.HedgeAfter <= 0 {
		opts.HedgeAfter = api.DefaultHedgeAfter
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	var ms []string
	for _, m := range masters {
		m = strings.TrimSpace(m)
		m = strings.TrimPrefix(strings.TrimPrefix(m, "http://"), "https://")
		if m == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(m); err != nil || port == "" {
			return nil, fmt.Errorf("master address %q is not host:port", m)
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, errors.New("no master addresses given")
	}
	scheme := "http://"
	if opts.TLS != nil {
		scheme = "https://"
	}
	c := &Client{masters: ms, opts: opts, scheme: scheme, http: transport.NewHTTPClient(opts.BindIP, 0, opts.TLS)}
	c.submits.c = c
	c.scheduleCalls.c = c
	return c, nil
}

// Response is a raw authoritative answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// From is the master that answered.
	From string
}

// Do sends a JSON request (in may be nil) and decodes a 2xx answer into out
// (which may be nil). A refusal is an *APIError; no authoritative answer
// before ctx ends is ErrNoMaster.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = api.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	resp, err := c.DoRaw(ctx, method, path, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return decodeJSON(resp, out)
}

// call is Do for endpoint e, typed by it: in is its body (none for
// api.NoBody), path is e's path naming the row (e.Path), and out takes the
// answer, nil to drop it.
func call[In, Out any](ctx context.Context, c *Client, e api.Endpoint[In, Out], path string, in In, out *Out) error {
	var body, into any
	if _, none := any(in).(api.NoBody); !none {
		body = in
	}
	if out != nil {
		into = out
	}
	return c.Do(ctx, e.Method, path, body, into)
}

// decodeJSON decodes an answer's body into out.
func decodeJSON(resp *Response, out any) error {
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("decode answer from %s: %w", resp.From, err)
	}
	return nil
}

// DoRaw is Do without JSON: it returns the first authoritative 2xx answer as
// bytes.
//
// Each master is tried on its own: one that answers without authority (503,
// a connection error) is asked again after a back-off, while a master that
// does not answer at all (paused, cut off) holds up no one. Retries reuse
// the request as is, so writes must be idempotent (submissions carry a
// token).
func (c *Client) DoRaw(ctx context.Context, method, path string, body []byte) (*Response, error) {
	return c.do(ctx, method, path, body, nil, 0)
}

// do is DoRaw with extra request headers, and each request to one master
// bounded by timeout rather than RequestTimeout when it is longer (a
// blocking read).
func (c *Client) do(ctx context.Context, method, path string, body []byte, header http.Header, timeout time.Duration) (*Response, error) {
	// Every master would refuse it alike, and may reset the connection
	// instead of answering 431, which would read as no leader until
	// ctx ends.
	if len(path) > api.MaxHeaderBytes {
		return nil, &APIError{Code: api.CodeTooLarge, err: api.ErrTooLarge,
			Message: fmt.Sprintf("request URL of %d bytes exceeds the masters' bound of %d bytes on a request's header", len(path), api.MaxHeaderBytes)}
	}
	begun := time.Now()
	// The requests end when ctx does, or a while after the first answer
	// (below): not at once when the caller, given its answer, ends ctx.
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// quit tells the goroutines of this call that no one reads their
	// results any more.
	quit := make(chan struct{})
	defer close(quit)
	type result struct {
		master string
		resp   *Response
		err    error
	}
	results := make(chan result)
	send := func(m string) {
		go func() {
			resp, err := c.one(reqCtx, m, method, path, body, header, timeout)
			select {
			case results <- result{m, resp, err}:
			case <-quit:
			}
		}()
	}
	retry := make(chan string)
	later := func(m string, d time.Duration) {
		time.AfterFunc(d, func() {
			select {
			case retry <- m:
			case <-quit:
			}
		})
	}

	sent := map[string]bool{}
	fanOut := func() {
		for _, m := range c.masters {
			if !sent[m] {
				sent[m] = true
				send(m)
			}
		}
	}
	var hedge <-chan time.Time
	if p := c.preferredMaster(); c.opts.Sticky && p != "" {
		sent[p] = true
		send(p)
		t := time.NewTimer(c.opts.HedgeAfter)
		defer t.Stop()
		hedge = t.C
	} else {
		fanOut()
	}
	waits := map[string]time.Duration{}
	reasons := map[string]string{}
	for {
		select {
		case r := <-results:
			if r.resp != nil || isAPIError(r.err) {
				// The other masters' copies are most likely answered
				// a moment later (a follower forwards its copy to the
				// leader, whose answer it passes on). Cut short, each
				// would cost its connection, and the follower's to the
				// leader too, so the next request would dial again;
				// they are given as long again as this answer took,
				// and at least lateAnswerGrace, before they are.
				time.AfterFunc(max(time.Since(begun), lateAnswerGrace), cancel)
				return r.resp, r.err
			}
			reasons[r.master] = r.err.Error()
			fanOut()
			w := waits[r.master]
			if w == 0 {
				w = c.opts.RetryInterval
			}
			waits[r.master] = min(w*2, c.opts.MaxRetryInterval)
			later(r.master, w)
		case m := <-retry:
			send(m)
		case <-hedge:
			fanOut()
		case <-ctx.Done():
			cancel()
			var rs []string
			for _, m := range c.masters {
				if r, ok := reasons[m]; ok {
					rs = append(rs, r)
				} else if sent[m] {
					rs = append(rs, m+": no answer")
				}
			}
			return nil, fmt.Errorf("%w: %s", ErrNoMaster, strings.Join(rs, "; "))
		}
	}
}

// lateAnswerGrace is the least time the other copies of a request get to
// finish after the first authoritative answer.
const lateAnswerGrace = 50 * time.Millisecond

// prefer makes the leader the preferred master when the answer from
// master names it (api.HeaderLeader) and it is one of the client's masters,
// and master otherwise: a sticky client then goes to the leader itself
// rather than through a follower that forwards each request to it.
func (c *Client) prefer(master, leader string) {
	if !slices.Contains(c.masters, leader) {
		leader = master
	}
	c.mu.Lock()
	c.preferred = leader
	c.mu.Unlock()
}

func (c *Client) preferredMaster() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.preferred
}

func isAPIError(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr)
}

// one sends the request to one master, within RequestTimeout or timeout,
// whichever is longer. A body goes as JSON unless header says otherwise.
func (c *Client) one(ctx context.Context, master, method, path string, body []byte, header http.Header, timeout time.Duration) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, max(c.opts.RequestTimeout, timeout))
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+master+path, rd)
	if err != nil {
		return nil, &APIError{Status: 0, Message: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return c.send(master, req)
}

// send sends req, with the client's token, to master and reads the answer:
// a 2xx is the Response, a 503 or 429 or a failure to connect a plain
// error (not authoritative: another master, or a retry, may do; one
// wrapping api.ErrNoLeader for a 503 of api.CodeNoLeader), any other
// answer (and a 429 with api.CodeLimitReached) an *APIError.
func (c *Client) send(master string, req *http.Request) (*Response, error) {
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	hr, err := c.http.Do(req)
	if err != nil {
		if refusedByTLS(err) {
			// Trying again cannot help: the master's certificate is
			// not one of the cluster's, or it refused ours.
			return nil, &APIError{Status: 0, Message: fmt.Sprintf("%s: %v", master, transport.RootCause(err))}
		}
		return nil, fmt.Errorf("%s: %v", master, transport.RootCause(err))
	}
	defer hr.Body.Close()
	tooLarge := api.TooLarge("the answer of "+master, c.opts.MaxResponseBytes, "the client's bound on an answer: drover client --max-response-size, Options.MaxResponseBytes")
	b, err := io.ReadAll(api.Bounded(hr.Body, c.opts.MaxResponseBytes, tooLarge))
	if errors.Is(err, api.ErrTooLarge) {
		// Every master would send the same answer: asking another
		// cannot help.
		return nil, &APIError{Status: 0, Code: api.CodeTooLarge, Message: err.Error(), err: api.ErrTooLarge}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %v", master, err)
	}
	if hr.StatusCode == http.StatusServiceUnavailable && codeOf(b) == api.CodeNoLeader {
		// Still not authoritative, but certain to have done nothing,
		// which callOnce needs to know.
		return nil, fmt.Errorf("%s: %w", master, api.Errorf(api.ErrNoLeader, "%s", errorMessage(hr.StatusCode, b)))
	}
	if hr.StatusCode == http.StatusServiceUnavailable || hr.StatusCode == http.StatusTooManyRequests && !limitReached(b) {
		return nil, fmt.Errorf("%s: %s", master, errorMessage(hr.StatusCode, b))
	}
	c.prefer(master, hr.Header.Get(api.HeaderLeader))
	if hr.StatusCode >= 300 {
		msg := errorMessage(hr.StatusCode, b)
		if c.opts.TLS == nil && strings.Contains(msg, "HTTP request to an HTTPS server") {
			msg = fmt.Sprintf("%s speaks HTTPS: this client needs the cluster CA (drover client: --ca-cert or $%s; drover worker: --tls-ca)", master, EnvCACert)
		}
		return nil, refusal(hr.StatusCode, b, msg)
	}
	return &Response{Status: hr.StatusCode, Header: hr.Header, Body: b, From: master}, nil
}

// limitReached reports whether an error answer's body has
// api.CodeLimitReached or api.CodeQueueFull: a bound of the cluster, not
// of this client's requests in flight.
func limitReached(body []byte) bool {
	c := codeOf(body)
	return c == api.CodeLimitReached || c == api.CodeQueueFull
}

// codeOf is the code of an error answer's body, "" when it has none.
func codeOf(body []byte) api.Code {
	var e api.Error
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Code
}

func errorMessage(status int, body []byte) string {
	var e api.Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	msg := strings.TrimSpace(string(body))
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return msg
}

// refusedByTLS reports whether err is a certificate the client does not
// trust.
func refusedByTLS(err error) bool {
	var cve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var alert tls.AlertError
	var plain tls.RecordHeaderError
	return errors.As(err, &cve) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &alert) || errors.As(err, &plain)
}
