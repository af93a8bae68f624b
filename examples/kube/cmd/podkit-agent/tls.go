package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/nodestatus"
)

// kubeletAPI returns the kubelet API configuration the flags give, or nil
// when there is no client CA (no client could be authenticated by
// certificate, the API server's included).
func kubeletAPI(clientCAFile, nodeIP string, port int, certFile, keyFile string) (*agent.KubeletAPIConfig, error) {
	if clientCAFile == "" {
		return nil, nil
	}
	ca, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	ip := nodestatus.HostIP()
	if nodeIP != "" {
		if ip = net.ParseIP(nodeIP); ip == nil {
			return nil, fmt.Errorf("--node-ip: %q is not an IP address", nodeIP)
		}
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("--kubelet-port: %d is out of range", port)
	}
	var cert tls.Certificate
	switch {
	case certFile != "" && keyFile != "":
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
	case certFile != "" || keyFile != "":
		return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file go together")
	default:
		if cert, err = selfSigned(ip); err != nil {
			return nil, err
		}
	}
	return &agent.KubeletAPIConfig{Address: ip, Port: port, Certificate: cert, ClientCA: ca}, nil
}

// selfSigned returns a self-signed serving certificate for ip, valid for a
// year, as the kubelet makes one when it is given none. The API server
// accepts it unless it runs with --kubelet-certificate-authority.
func selfSigned(ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	hostname, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: hostname + "@podkit-agent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip},
		DNSNames:     []string{hostname},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
