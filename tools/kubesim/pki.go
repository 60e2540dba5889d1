package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long on purpose: a development cluster's data dir may be
// reused for years, and expiring certificates would break it silently.
const certValidity = 10 * 365 * 24 * time.Hour

// keyPair is a certificate with its private key, as files under DIR/pki.
type keyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// leafSpec describes one certificate signed by the cluster CA.
type leafSpec struct {
	file   string // base name under DIR/pki
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []net.IP
}

// clusterPKI is every key the cluster needs.
type clusterPKI struct {
	Dir string
	CA  keyPair
}

// leaves lists the certificates kubesim issues. The admin certificate is in
// system:masters; the controller manager and scheduler use the identities
// that the default RBAC policy expects.
func leaves() []leafSpec {
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	return []leafSpec{
		{file: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: append(loopback, net.ParseIP(kubernetesServiceIP))},
		{file: "etcd-server", cn: "etcd", server: true, client: true, dns: []string{"localhost"}, ips: loopback},
		{file: "apiserver-etcd-client", cn: "kube-apiserver-etcd-client", client: true},
		{file: "admin", cn: "kubesim-admin", orgs: []string{"system:masters"}, client: true},
		{file: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{file: "scheduler", cn: "system:kube-scheduler", client: true},
		{file: "kwok", cn: "kwok", orgs: []string{"system:masters"}, client: true},
	}
}

// loadOrCreatePKI loads DIR/pki, creating whatever is missing. Existing files
// are never replaced: a restart keeps the same CA, so old kubeconfigs work.
func loadOrCreatePKI(dir string) (*clusterPKI, error) {
	ca, err := loadOrCreate(dir, "ca", func() (keyPair, error) { return newCA() })
	if err != nil {
		return nil, err
	}
	p := &clusterPKI{Dir: dir, CA: ca}
	for _, spec := range leaves() {
		if _, err := loadOrCreate(dir, spec.file, func() (keyPair, error) { return newLeaf(ca, spec) }); err != nil {
			return nil, err
		}
	}
	if err := ensureServiceAccountKey(dir); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *clusterPKI) cert(name string) string { return filepath.Join(p.Dir, name+".crt") }
func (p *clusterPKI) key(name string) string  { return filepath.Join(p.Dir, name+".key") }

func loadOrCreate(dir, name string, create func() (keyPair, error)) (keyPair, error) {
	certFile := filepath.Join(dir, name+".crt")
	keyFile := filepath.Join(dir, name+".key")
	kp, err := loadKeyPair(certFile, keyFile)
	if err == nil {
		return kp, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return keyPair{}, err
	}
	kp, err = create()
	if err != nil {
		return keyPair{}, fmt.Errorf("create %s certificate: %w", name, err)
	}
	if err := writeFileAtomic(keyFile, kp.KeyPEM, 0o600); err != nil {
		return keyPair{}, err
	}
	if err := writeFileAtomic(certFile, kp.CertPEM, 0o644); err != nil {
		return keyPair{}, err
	}
	return kp, nil
}

func loadKeyPair(certFile, keyFile string) (keyPair, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return keyPair{}, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, fmt.Errorf("%s is corrupt: no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%s is corrupt: %w", certFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%s is corrupt: %w", keyFile, err)
	}
	return keyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func newCA() (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kubesim-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil)
}

func newLeaf(ca keyPair, spec leafSpec) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:    spec.dns,
		IPAddresses: spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return sign(tmpl, &ca)
}

// sign creates a key and a certificate for tmpl, signed by ca, or
// self-signed when ca is nil.
func sign(tmpl *x509.Certificate, ca *keyPair) (keyPair, error) {
	return signFor(tmpl, ca, certValidity)
}

// signFor is sign with the given validity.
func signFor(tmpl *x509.Certificate, ca *keyPair, validity time.Duration) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(validity)
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ensureServiceAccountKey writes sa.key and sa.pub, the pair the API server
// signs service-account tokens with.
func ensureServiceAccountKey(dir string) error {
	keyFile, pubFile := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	var key *ecdsa.PrivateKey
	keyPEM, err := os.ReadFile(keyFile)
	switch {
	case err == nil:
		b, _ := pem.Decode(keyPEM)
		if b == nil {
			return fmt.Errorf("%s is corrupt: no PEM block", keyFile)
		}
		if key, err = x509.ParseECPrivateKey(b.Bytes); err != nil {
			return fmt.Errorf("%s is corrupt: %w", keyFile, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
			return err
		}
	default:
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	return writeFileAtomic(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}
