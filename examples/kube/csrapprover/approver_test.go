package csrapprover

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

func servingCSR(t *testing.T, name, user string, cn string, ips []net.IP, dns []string, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		IPAddresses: ips,
		DNSNames:    dns,
	}, key)
	require.NoError(t, err)
	if usages == nil {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     usages,
			Username:   user,
			Groups:     []string{"system:nodes", "system:authenticated"},
		},
	}
}

func nodeWith(name string, addrs ...v1.NodeAddress) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Addresses: addrs}}
}

func TestCheck(t *testing.T) {
	ip := net.ParseIP("10.0.0.5")
	node := nodeWith("n1", v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"})
	good := func() *certificatesv1.CertificateSigningRequest {
		return servingCSR(t, "good", "system:node:n1", "system:node:n1", []net.IP{ip}, []string{"n1"})
	}
	require.NoError(t, Check(good(), node))

	cases := map[string]struct {
		csr  *certificatesv1.CertificateSigningRequest
		want string
	}{
		"another node's requester": {servingCSR(t, "x", "system:node:n2", "system:node:n1", []net.IP{ip}, nil), "not by system:node:n1"},
		"not a node":               {servingCSR(t, "x", "alice", "system:node:n1", []net.IP{ip}, nil), "not by system:node:n1"},
		"another subject":          {servingCSR(t, "x", "system:node:n1", "system:node:n2", []net.IP{ip}, nil), "subject"},
		"an IP not the node's":     {servingCSR(t, "x", "system:node:n1", "system:node:n1", []net.IP{net.ParseIP("10.0.0.6")}, nil), "IP 10.0.0.6 is not an address"},
		"a name not the node's":    {servingCSR(t, "x", "system:node:n1", "system:node:n1", nil, []string{"api.example.com"}), "DNS name api.example.com"},
		"no names":                 {servingCSR(t, "x", "system:node:n1", "system:node:n1", nil, nil), "names no IP"},
		"client usage":             {servingCSR(t, "x", "system:node:n1", "system:node:n1", []net.IP{ip}, nil, certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth), "not for serving"},
		"no server auth":           {servingCSR(t, "x", "system:node:n1", "system:node:n1", []net.IP{ip}, nil, certificatesv1.UsageDigitalSignature), "no server auth"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := Check(c.csr, node)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "csrapprover: CSR x: ")
			assert.Contains(t, err.Error(), c.want)
		})
	}
	otherSigner := good()
	otherSigner.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
	require.ErrorContains(t, Check(otherSigner, node), "signer")
	garbled := good()
	garbled.Spec.Request = []byte("not pem")
	require.ErrorContains(t, Check(garbled, node), "not a PEM CERTIFICATE REQUEST")
	require.Error(t, Check(nil, node))
}

// TestApproverWaitsForTheNodesAddress: a CSR naming an address the Node
// does not publish yet stays pending, and is approved once the Node
// publishes it; a CSR for another's address is never approved.
func TestApproverWaitsForTheNodesAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := nodeWith("n1", v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"})
	client := fake.NewClientset(node,
		servingCSR(t, "mine", "system:node:n1", "system:node:n1", []net.IP{net.ParseIP("10.0.0.5")}, []string{"n1"}),
		servingCSR(t, "theirs", "system:node:n1", "system:node:n1", []net.IP{net.ParseIP("10.0.0.9")}, nil))
	a := &Approver{Client: client}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	approved := func(name string) bool {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return decided(csr)
	}
	// Checked at least twice (with backoff) while the address is missing.
	require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		n := 0
		for _, act := range client.Actions() {
			if act.GetVerb() == "get" && act.GetResource().Resource == "nodes" {
				n++
			}
		}
		return n >= 4, nil
	}))
	assert.False(t, approved("mine"), "not approved before the Node publishes its IP")

	node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.5"})
	_, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return approved("mine"), nil
	}), "approved once the Node publishes the IP")
	csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, "mine", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, csr.Status.Conditions, 1)
	assert.Equal(t, ReasonAutoApproved, csr.Status.Conditions[0].Reason)
	assert.False(t, approved("theirs"), "another address is never approved")
	cancel()
	require.NoError(t, <-done)
}
