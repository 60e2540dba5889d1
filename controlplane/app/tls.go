package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// needsTLS reports whether the listen address reaches beyond loopback.
func needsTLS(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// tlsConfig loads the configured certificate, or a self-signed one in the data dir (tls.crt, tls.key;
// clients trust tls.crt with --ca-cert / QLEET_CA_CERT), made on first start and made again when it
// does not cover every name and address the control plane is reached by (sans).
func (a *App) tlsConfig() (*tls.Config, error) {
	certFile, keyFile := a.cfg.TLSCertFile, a.cfg.TLSKeyFile
	if certFile == "" {
		certFile = filepath.Join(a.cfg.DataDir, "tls.crt")
		keyFile = filepath.Join(a.cfg.DataDir, "tls.key")
		dns, ips := sans(a.cfg.Listen, a.cfg.TLSSANs)
		if !covers(certFile, dns, ips) {
			if err := selfSigned(certFile, keyFile, dns, ips); err != nil {
				return nil, err
			}
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	a.CACertPath = certFile
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// sans returns the names and addresses a self-signed certificate must cover: loopback, the listen
// address (every interface's addresses when it is a wildcard), the host name, and the extras.
func sans(listen string, extra []string) ([]string, []net.IP) {
	dns := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		ip := net.ParseIP(host)
		switch {
		case host == "" || ip != nil && ip.IsUnspecified():
			if addrs, err := net.InterfaceAddrs(); err == nil {
				for _, a := range addrs {
					if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
						ips = append(ips, n.IP)
					}
				}
			}
		case ip != nil:
			ips = append(ips, ip)
		default:
			dns = append(dns, host)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		dns = append(dns, h)
	}
	for _, e := range extra {
		if ip := net.ParseIP(e); ip != nil {
			ips = append(ips, ip)
		} else if e != "" {
			dns = append(dns, e)
		}
	}
	return dns, ips
}

// covers reports whether the certificate in certFile names every one of dns and ips.
func covers(certFile string, dns []string, ips []net.IP) bool {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return false
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	for _, d := range dns {
		if cert.VerifyHostname(d) != nil {
			return false
		}
	}
	for _, ip := range ips {
		if cert.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

func selfSigned(certFile, keyFile string, dns []string, ips []net.IP) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "qleet"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(5, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keyFile, err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certFile, err)
	}
	return nil
}
