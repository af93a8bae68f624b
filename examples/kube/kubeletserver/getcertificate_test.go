package kubeletserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// TestGetCertificateServesTheRotatingCertificate: with GetCertificate set,
// a client dialing the node's IP (no server name, as the API server) is
// served the certificate it returns at each handshake, not Certificate;
// its error fails the handshake.
func TestGetCertificateServesTheRotatingCertificate(t *testing.T) {
	var current atomic.Pointer[tls.Certificate]
	n := startNode(t, kubeletserver.Options{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := current.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("no serving certificate yet")
	}})
	dial := func() (*x509.Certificate, error) {
		conn, err := tls.Dial("tcp", n.addr, n.tlsConfig())
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	_, err := dial()
	require.Error(t, err, "no handshake before a certificate is issued")

	for _, cn := range []string{"issued", "rotated"} {
		cert, _, _ := n.pki.sign(t, pkix.Name{CommonName: cn}, x509.ExtKeyUsageServerAuth)
		current.Store(&cert)
		got, err := dial()
		require.NoError(t, err)
		assert.Equal(t, cn, got.Subject.CommonName)
	}
}
