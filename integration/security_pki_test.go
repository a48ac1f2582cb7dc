package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pki is a throwaway certificate authority made for one test: a CA, a
// server certificate for 127.0.0.1 and localhost, and a client
// certificate for mutual TLS, each also written as PEM files the
// services' TLS options read. otherCA is an unrelated CA, to show a
// client that trusts the wrong one is refused.
type pki struct {
	dir                    string
	caFile, otherCAFile    string
	serverCert, serverKey  string
	clientCert, clientKey  string
	ca                     *x509.Certificate
	caKey                  *ecdsa.PrivateKey
	serverPair, clientPair tls.Certificate
	caPool                 *x509.CertPool
	serverTLS              *tls.Config // server side, client certificates optional
	serverMTLS             *tls.Config // server side, client certificate required
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	p.ca, p.caKey = selfSigned(t, "ilb test CA")
	p.caFile = p.writePEM(t, "ca.pem", "CERTIFICATE", p.ca.Raw)
	other, _ := selfSigned(t, "some other CA")
	p.otherCAFile = p.writePEM(t, "other-ca.pem", "CERTIFICATE", other.Raw)
	p.serverPair, p.serverCert, p.serverKey = p.issue(t, "server", x509.ExtKeyUsageServerAuth)
	p.clientPair, p.clientCert, p.clientKey = p.issue(t, "client", x509.ExtKeyUsageClientAuth)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(p.ca)
	p.serverTLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.serverPair},
		ClientCAs: p.caPool, ClientAuth: tls.VerifyClientCertIfGiven}
	p.serverMTLS = p.serverTLS.Clone()
	p.serverMTLS.ClientAuth = tls.RequireAndVerifyClientCert
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// selfSigned makes a CA certificate valid for an hour.
func selfSigned(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
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
	return cert, key
}

// issue signs a leaf certificate for 127.0.0.1 and localhost with the CA
// and writes it and its key as PEM files named NAME.pem and NAME-key.pem.
func (p *pki) issue(t testing.TB, name string, usage x509.ExtKeyUsage) (tls.Certificate, string, string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "ilb " + name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile := p.writePEM(t, name+".pem", "CERTIFICATE", der)
	keyFile := p.writePEM(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certFile, keyFile
}

func (p *pki) writePEM(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeSecret writes a secret to a file only its owner can read.
func writeSecret(t testing.TB, dir, name, secret string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
