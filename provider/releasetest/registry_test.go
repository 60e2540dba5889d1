package releasetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// registry is a minimal provider registry (https://developer.hashicorp.com/terraform/internals/provider-registry-protocol)
// over HTTPS, as a private registry such as Terraform Cloud's serves it: service discovery, the
// versions list, and per platform the download answer that names the zip, SHA256SUMS, its signature
// and the public key to check it with. It serves one release under namespaces of the test's choice.
type registry struct {
	srv *httptest.Server
	// Host is the source address host, "localhost:<port>".
	Host string
	// CAFile holds the certificate of the CA that signed the server's certificate.
	CAFile string
	rel    *release
	// sums overrides the SHA256SUMS served under a namespace (a tampered release).
	sums map[string][]byte

	mu       sync.Mutex
	requests []string
}

// startRegistry serves rel under any namespace (provider type qleet), over TLS with a certificate for
// localhost from a CA of its own.
func startRegistry(t *testing.T, rel *release) *registry {
	t.Helper()
	ca := newCA(t, "registry test CA")
	r := &registry{rel: rel, sums: map[string][]byte{}, CAFile: filepath.Join(t.TempDir(), "registry-ca.pem")}
	if err := os.WriteFile(r.CAFile, ca.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"providers.v1": "/v1/providers/"})
	})
	mux.HandleFunc("GET /v1/providers/{ns}/qleet/versions", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"versions": []any{map[string]any{
			"version": rel.Version, "protocols": rel.Protocols,
			"platforms": []any{map[string]string{"os": rel.OS, "arch": rel.Arch}},
		}}})
	})
	mux.HandleFunc("GET /v1/providers/{ns}/qleet/{version}/download/{os}/{arch}", func(w http.ResponseWriter, req *http.Request) {
		if req.PathValue("version") != rel.Version || req.PathValue("os") != rel.OS || req.PathValue("arch") != rel.Arch {
			http.NotFound(w, req)
			return
		}
		files := "https://" + r.Host + "/files/" + req.PathValue("ns") + "/"
		writeJSON(w, map[string]any{
			"protocols": rel.Protocols, "os": rel.OS, "arch": rel.Arch,
			"filename":              rel.ZipName,
			"download_url":          files + rel.ZipName,
			"shasums_url":           files + rel.SumsName,
			"shasums_signature_url": files + rel.SigName,
			"shasum":                rel.ZipSHA256,
			"signing_keys": map[string]any{"gpg_public_keys": []any{map[string]string{
				"key_id": rel.KeyID, "ascii_armor": rel.ArmoredKey,
			}}},
		})
	})
	mux.HandleFunc("GET /files/{ns}/{name}", func(w http.ResponseWriter, req *http.Request) {
		name := req.PathValue("name")
		if s, ok := r.sums[req.PathValue("ns")]; ok && name == rel.SumsName {
			_, _ = w.Write(s)
			return
		}
		if name != rel.ZipName && name != rel.SumsName && name != rel.SigName && name != rel.ManifestName {
			http.NotFound(w, req)
			return
		}
		http.ServeFile(w, req, filepath.Join(rel.Dir, name))
	})
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		mux.ServeHTTP(w, req)
	}))
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "localhost")}, MinVersion: tls.VersionTLS12}
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	_, port, _ := net.SplitHostPort(r.srv.Listener.Addr().String())
	r.Host = "localhost:" + port
	return r
}

// tamper serves, under namespace ns, a SHA256SUMS that its signature does not cover.
func (r *registry) tamper(t *testing.T, ns string) {
	t.Helper()
	sums, err := os.ReadFile(filepath.Join(r.rel.Dir, r.rel.SumsName))
	if err != nil {
		t.Fatal(err)
	}
	r.sums[ns] = append(sums, []byte(strings.Repeat("0", 64)+"  extra.zip\n")...)
}

// served returns the requests the registry answered whose path starts with prefix.
func (r *registry) served(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.requests {
		if strings.HasPrefix(strings.TrimPrefix(q, "GET "), prefix) {
			out = append(out, q)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a server certificate for host and the loopback addresses, with the CA's certificate in
// its chain.
func (ca *testCA) issue(t *testing.T, host string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{host}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}
}

// writePair writes a certificate (with its chain) and its key as PEM files in dir.
func writePair(t *testing.T, dir string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	var chain []byte
	for _, der := range c.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, chain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
