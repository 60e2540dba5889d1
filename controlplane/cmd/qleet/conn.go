package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/qleetos/terraform-provider-qleet/client"
)

// defaultEndpoint is where `qleet server` listens by default.
const defaultEndpoint = "http://127.0.0.1:8080"

// connFlags are the flags with which every CLI verb finds the API.
type connFlags struct {
	endpoint, token, caCert, context, dataDir string
}

// addConnFlags registers the connection flags on fs.
func (q *cli) addConnFlags(fs *pflag.FlagSet) {
	fs.StringVar(&q.conn.endpoint, "endpoint", "", "the QleetOS API endpoint (env QLEET_ENDPOINT; default: the current context's, else "+defaultEndpoint+")")
	fs.StringVar(&q.conn.token, "token", "", "the bearer token (env QLEET_TOKEN; default: the current context's, else the admin token in the data dir)")
	fs.StringVar(&q.conn.caCert, "ca-cert", "", "the CA certificate (PEM file) of a TLS endpoint (env QLEET_CA_CERT; default: the current context's)")
	fs.StringVar(&q.conn.context, "context", "", "the context of the config file to use (env QLEET_CONTEXT; default: its current context)")
	fs.StringVar(&q.conn.dataDir, "data-dir", "", "the data dir of a local qleet server, for its admin token and local runtimes (env QLEET_DATA_DIR; default .qleet)")
}

// env returns $QLEET_<NAME> (dashes become underscores), or def when it is empty.
func (q *cli) env(name, def string) string {
	if v := q.getenv("QLEET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
		return v
	}
	return def
}

// dataDir is the local data dir: --data-dir, QLEET_DATA_DIR, or .qleet.
func (q *cli) dataDir() string {
	if q.conn.dataDir != "" {
		return q.conn.dataDir
	}
	return q.env("data-dir", ".qleet")
}

// connection is where and how the CLI reaches the API, and where each part came from.
type connection struct {
	// Endpoint is the API base URL; EndpointFrom says where it came from, e.g. "QLEET_ENDPOINT".
	Endpoint, EndpointFrom string
	// Token is the bearer token; TokenFrom says where it came from.
	Token, TokenFrom string
	// CACert is a PEM file to trust, or empty.
	CACert string
}

// resolveConn picks the endpoint, token and CA certificate: flags, then environment, then the config
// file's context, then the defaults (the admin token in the data dir). A context's token and CA are used
// only for the context's own endpoint, so that a token is never sent to an endpoint given elsewhere.
func (q *cli) resolveConn() (connection, error) {
	cfg, path, err := q.loadConfig()
	if err != nil {
		return connection{}, err
	}
	var cur *configContext
	name, explicit := q.conn.context, true
	if name == "" {
		name = q.getenv("QLEET_CONTEXT")
	}
	if name == "" {
		name, explicit = cfg.CurrentContext, false
	}
	if name != "" {
		if cur = cfg.find(name); cur == nil {
			if explicit {
				return connection{}, usagef("no context %q in %s (see qleet config get-contexts)", name, path)
			}
			return connection{}, fmt.Errorf("the current context %q is not in %s: run qleet config use-context", name, path)
		}
	}
	var c connection
	switch {
	case q.conn.endpoint != "":
		c.Endpoint, c.EndpointFrom = q.conn.endpoint, "--endpoint"
	case q.getenv("QLEET_ENDPOINT") != "":
		c.Endpoint, c.EndpointFrom = q.getenv("QLEET_ENDPOINT"), "QLEET_ENDPOINT"
	case cur != nil:
		c.Endpoint, c.EndpointFrom = cur.Endpoint, fmt.Sprintf("context %q", cur.Name)
	default:
		c.Endpoint, c.EndpointFrom = defaultEndpoint, "the default"
	}
	useCtx := cur != nil && sameEndpoint(cur.Endpoint, c.Endpoint)
	switch {
	case q.conn.token != "":
		c.Token, c.TokenFrom = q.conn.token, "--token"
	case q.getenv("QLEET_TOKEN") != "":
		c.Token, c.TokenFrom = q.getenv("QLEET_TOKEN"), "QLEET_TOKEN"
	case useCtx && cur.Token != "":
		c.Token, c.TokenFrom = cur.Token, fmt.Sprintf("context %q", cur.Name)
	default:
		p := filepath.Join(q.dataDir(), "admin.token")
		data, err := os.ReadFile(p)
		if err != nil {
			return connection{}, fmt.Errorf("no token: run qleet login, set QLEET_TOKEN, or run where %s exists (%w)", p, err)
		}
		c.Token, c.TokenFrom = strings.TrimSpace(string(data)), p
	}
	switch {
	case q.conn.caCert != "":
		c.CACert = q.conn.caCert
	case q.getenv("QLEET_CA_CERT") != "":
		c.CACert = q.getenv("QLEET_CA_CERT")
	case useCtx:
		c.CACert = cur.CACert
	}
	return c, nil
}

// sameEndpoint compares two endpoints, ignoring a trailing slash.
func sameEndpoint(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// client returns an API client for the resolved connection.
func (q *cli) client() (*client.Client, error) {
	c, err := q.resolveConn()
	if err != nil {
		return nil, err
	}
	return newAPIClient(c)
}

// newAPIClient builds the client of a connection, trusting its CA certificate.
func newAPIClient(c connection) (*client.Client, error) {
	opts := []client.Option{client.WithToken(c.Token), client.WithUserAgent("qleet-cli/" + buildVersion().Version)}
	if c.CACert != "" {
		pemData, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		opts = append(opts, client.WithCACert(pemData))
	}
	return client.New(c.Endpoint, opts...)
}

// explain turns an error that says the API could not be reached into a sentence that says what to do;
// other errors pass through.
func (q *cli) explain(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	var unknownCA x509.UnknownAuthorityError
	if errors.As(err, &unknownCA) {
		return fmt.Errorf("%w: trust the API's CA certificate with --ca-cert, QLEET_CA_CERT or qleet login --ca-cert "+
			"(qleet server writes it to <data-dir>/tls.crt)", err)
	}
	var reason string
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.As(err, &dnsErr):
		reason = "no such host " + dnsErr.Name
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		reason = "no route to host"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		reason = opErr.Err.Error()
	default:
		return err
	}
	endpoint := ue.URL
	from := ""
	if c, rerr := q.resolveConn(); rerr == nil {
		endpoint, from = c.Endpoint, ", from "+c.EndpointFrom
	}
	return fmt.Errorf("cannot reach the QleetOS API at %s: is `qleet server` running? (%s%s)", endpoint, reason, from)
}
