package clustertest

import (
	"crypto"
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
	"time"
)

// certValidity is how long the cluster's certificates are valid: far longer
// than any test or demo cluster lives.
const certValidity = 10 * 365 * 24 * time.Hour

// Every key, certificate and kubeconfig the harness writes is readable by
// its owner only, in directories only the owner may enter: they are the
// cluster's credentials.
const (
	privateFile = 0o600
	privateDir  = 0o700
)

// authority is a certificate authority made for the cluster.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// newAuthority creates a self-signed CA named commonName.
func newAuthority(commonName string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// writeCert writes the CA's certificate to path.
func (a *authority) writeCert(path string) error {
	return os.WriteFile(path, a.certPEM, privateFile)
}

// writeKey writes the CA's private key to path.
func (a *authority) writeKey(path string) error {
	der, err := x509.MarshalECPrivateKey(a.key.(*ecdsa.PrivateKey))
	if err != nil {
		return err
	}
	return os.WriteFile(path, pemBlock("EC PRIVATE KEY", der), privateFile)
}

// keyPair is a certificate and its key, PEM-encoded.
type keyPair struct {
	certPEM, keyPEM []byte
}

// tls returns the pair as a tls.Certificate.
func (k keyPair) tls() (tls.Certificate, error) { return tls.X509KeyPair(k.certPEM, k.keyPEM) }

// write writes the pair to certFile and keyFile.
func (k keyPair) write(certFile, keyFile string) error {
	if err := os.WriteFile(certFile, k.certPEM, privateFile); err != nil {
		return err
	}
	return os.WriteFile(keyFile, k.keyPEM, privateFile)
}

// clientCert issues a client certificate for user in groups: the API
// server and the agents read the user from the common name and the groups
// from the organizations, as Kubernetes does.
func (a *authority) clientCert(user string, groups ...string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// servingCert issues a serving certificate for the given IPs and DNS
// names.
func (a *authority) servingCert(commonName string, ips []net.IP, dnsNames []string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips,
		DNSNames:    dnsNames,
	})
}

// peerCert issues a certificate that both serves and authenticates as a
// client, as an etcd member's does.
func (a *authority) peerCert(commonName string, ips []net.IP, dnsNames []string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
		DNSNames:    dnsNames,
	})
}

func (a *authority) issue(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(2))
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("clustertest: issuing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

// writeServiceAccountKey writes a fresh key that signs service account
// tokens to path.
func writeServiceAccountKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pemBlock("EC PRIVATE KEY", der), privateFile)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
