package transport

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/drover-project/drover/api"
)

// Gate is what every HTTP listener of a node (a master's API and web UI,
// its Spark REST listener, a worker's) checks of a request before any
// handler sees it, against what a browser can be made to send by a page
// of another site:
//
//   - Host, where the listener answers without any credential (an open
//     node; see GateConfig.CheckHost): the request must name the node by
//     its bind address, localhost, 127.0.0.1 or ::1, or a name given in
//     GateConfig.AllowedHosts, with or without the port. A page whose own
//     name resolves to the node's address (DNS rebinding) makes the
//     browser send that name as Host and read the answer as the page's
//     own; refused 421 (api.ErrMisdirected), the status RFC 9110 gives a
//     server that does not answer for the name it is asked under, so that
//     it is not taken for a refused credential.
//   - the origin of an unsafe method (POST, PUT, PATCH, DELETE), always:
//     one that a browser says another site sent (Sec-Fetch-Site, or an
//     Origin that does not match Host) is refused 403 (api.ErrForbidden),
//     through Go's http.CrossOriginProtection, as the web UI's forms
//     always were. Programs (curl, the Go client, spark-submit) send
//     neither header and pass.
//
// A Gate is safe for concurrent use.
type Gate struct {
	// hosts are the names Host may give, lowercased without a trailing
	// dot, and ips the addresses; both nil when Host is not checked.
	hosts map[string]bool
	ips   []net.IP
	// anyIP: bound to an unspecified address, the node answers at every
	// address of its host, and any IP literal names it.
	anyIP  bool
	origin *http.CrossOriginProtection
}

// GateConfig shapes a Gate.
type GateConfig struct {
	// CheckHost turns the Host check on: for a listener that answers
	// anyone without a credential, which a page can have a browser ask
	// under the page's own name.
	CheckHost bool
	// BindIP is the address the listener is bound to.
	BindIP string
	// AllowedHosts are more names (or addresses) the node is known by,
	// without a port (--allowed-hosts); CheckAllowedHosts checks them.
	AllowedHosts []string
}

// hostName is the form of a name --allowed-hosts takes: DNS labels of
// letters, digits, '-' and '_', separated by dots.
var hostName = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$`)

// CheckAllowedHosts returns an error naming the first entry of names that
// is neither a host name nor an IP address (a port, a scheme or a pattern
// is not taken).
func CheckAllowedHosts(names []string) error {
	for _, n := range names {
		if net.ParseIP(n) == nil && !hostName.MatchString(n) {
			return fmt.Errorf("--allowed-hosts %q is not a host name or an IP address (no port, scheme or pattern)", n)
		}
	}
	return nil
}

// NewGate returns the Gate of a listener. An AllowedHosts entry that
// CheckAllowedHosts refuses is an error.
func NewGate(cfg GateConfig) (*Gate, error) {
	if err := CheckAllowedHosts(cfg.AllowedHosts); err != nil {
		return nil, err
	}
	g := &Gate{origin: http.NewCrossOriginProtection()}
	if !cfg.CheckHost {
		return g, nil
	}
	g.hosts = map[string]bool{"localhost": true}
	g.ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(cfg.BindIP); ip != nil {
		g.ips = append(g.ips, ip)
		g.anyIP = ip.IsUnspecified()
	}
	for _, n := range cfg.AllowedHosts {
		if ip := net.ParseIP(n); ip != nil {
			g.ips = append(g.ips, ip)
		} else {
			g.hosts[canonicalName(n)] = true
		}
	}
	return g, nil
}

// canonicalName is a host name as the Host check compares it: DNS names
// are case-insensitive, and a trailing dot names the same host.
func canonicalName(n string) string { return strings.TrimSuffix(strings.ToLower(n), ".") }

// Check returns nil for a request that may reach the listener's handlers,
// and otherwise the refusal, in one line, wrapping api.ErrMisdirected (a
// Host the node does not answer to) or api.ErrForbidden (a cross-origin
// write). It reads nothing of the body.
func (g *Gate) Check(r *http.Request) error {
	if g.hosts != nil && !g.knows(r.Host) {
		return api.Errorf(api.ErrMisdirected,
			"this node runs without TLS or tokens and answers only to its own address, localhost, 127.0.0.1 and [::1] (and --allowed-hosts), not to Host %s: a web page under another name may not use it (DNS rebinding)",
			api.QuoteHeader(r.Host))
	}
	if err := g.origin.Check(r); err != nil {
		from := "Sec-Fetch-Site " + api.QuoteHeader(r.Header.Get("Sec-Fetch-Site"))
		if r.Header.Get("Sec-Fetch-Site") == "" {
			from = "Origin " + api.QuoteHeader(r.Header.Get("Origin"))
		}
		return api.Errorf(api.ErrForbidden, "cross-origin %s refused: a browser says another site sent it (%s); send it from a program, or from this node's own pages",
			r.Method, from)
	}
	return nil
}

// knows reports whether host (a Host header: a name or address, with or
// without a port) names this node.
func (g *Gate) knows(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if ip := net.ParseIP(host); ip != nil {
		if g.anyIP {
			return true
		}
		for _, known := range g.ips {
			if known.Equal(ip) {
				return true
			}
		}
		return false
	}
	return host != "" && g.hosts[canonicalName(host)]
}

// Wrap returns h behind the gate: a refused request is answered by refuse
// (the listener's own error format: a status from api.CodeOf and the
// message) on a connection that then closes, and reaches nothing of h.
func (g *Gate) Wrap(h http.Handler, refuse func(http.ResponseWriter, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.Check(r); err != nil {
			w.Header().Set("Connection", "close")
			refuse(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
