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
	"path/filepath"
	"time"
)

// certValidity is how long the cluster's certificates are valid: far longer
// than any test or demo cluster lives.
const certValidity = 10 * 365 * 24 * time.Hour

// authority is the cluster's one certificate authority. It signs the API
// server's serving certificate, every client certificate (administrator,
// node identities, the API server's kubelet client) and the agents'
// serving certificates, so one CA file verifies everything in the
// cluster.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	// certFile is certPEM on disk, for the flags that want a file.
	certFile string
}

// newAuthority creates a self-signed CA and writes its certificate to
// dir/ca.crt.
func newAuthority(dir string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "podkit-cluster-ca"},
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
	a := &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}
	a.certFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(a.certFile, a.certPEM, 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// pool returns a pool holding the CA.
func (a *authority) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// keyPair is a certificate and its key, PEM-encoded.
type keyPair struct {
	certPEM, keyPEM []byte
}

// tls returns the pair as a tls.Certificate.
func (k keyPair) tls() (tls.Certificate, error) { return tls.X509KeyPair(k.certPEM, k.keyPEM) }

// write writes the pair to dir/name.crt and dir/name.key and returns the
// two paths.
func (k keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, k.certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, k.keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
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

// serviceAccountKey writes a fresh key that signs service account tokens
// to dir/sa.key, and returns its path.
func serviceAccountKey(dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "sa.key")
	return path, os.WriteFile(path, pemBlock("EC PRIVATE KEY", der), 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
