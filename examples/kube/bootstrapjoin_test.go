package kube_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podkit/podkit/examples/kube/bootstrap"
	"github.com/podkit/podkit/examples/kube/csrapprover"
)

// testBootstrapJoin: the podkit-agent command joins the cluster as a
// kubelet joins a kubeadm cluster, with a bootstrap token and nothing else
// of the cluster's but its CA: its client CSR is approved and signed by
// kube-controller-manager, the certificate kept in its state directory
// (0600) is the cluster CA's for system:node:<name>, the kubeconfig it
// writes acts as the node, the Node is Ready, and the API server reaches
// its kubelet API, checking its serving certificate against the cluster CA:
// one from the kubelet-serving signer, approved by the cluster's approver.
func testBootstrapJoin(t *testing.T, h *harness) {
	const node = "join-0"
	ctx := testContextFor(t, clusterTimeout)
	admin := h.c.Admin()
	bin := buildOnce(t, "github.com/podkit/podkit/examples/kube/cmd/podkit-agent")

	tok, err := h.c.CreateBootstrapToken(ctx, 10*time.Minute)
	require.NoError(t, err)
	dir := t.TempDir()
	bootstrapKubeconfig := filepath.Join(dir, "bootstrap.kubeconfig")
	require.NoError(t, h.c.WriteBootstrapKubeconfig(bootstrapKubeconfig, tok))
	caFile := filepath.Join(dir, "ca.crt")
	caPEM := h.c.AdminConfig().CAData
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
	stateDir := filepath.Join(dir, "state")
	nodeKubeconfig := filepath.Join(dir, "node.kubeconfig")

	cmd := exec.Command(bin, "--node-name", node, "--state-dir", stateDir,
		"--bootstrap-kubeconfig", bootstrapKubeconfig, "--kubeconfig", nodeKubeconfig,
		"--client-ca-file", caFile, "--node-ip", clusterNodeIP().String(), "--kubelet-port", "0",
		"--rotate-server-certificates", "--heartbeat-interval", "1s", "-v", "2")
	logs, err := os.Create(filepath.Join(dir, "agent.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("podkit-agent output:\n%s", b)
		}
	})
	start := time.Now()

	waitNode(t, admin, node, "registered by the bootstrapped agent and Ready", nodeReady)
	t.Logf("node %s Ready %v after the agent started", node, time.Since(start).Round(time.Millisecond))

	// The client CSR: asked with the bootstrap token, approved and signed
	// by kube-controller-manager.
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	client := findCSR(csrs.Items, certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:"+tok.ID)
	require.NotNil(t, client, "a client CSR of the bootstrap token: %v", csrNames(csrs.Items))
	assert.Equal(t, "AutoApproved", approvedReason(client), "kube-controller-manager approved it")
	assert.NotEmpty(t, client.Status.Certificate, "kube-controller-manager signed it")

	// The pair in the state directory: the cluster CA's, for the node,
	// readable by its owner only.
	pair := filepath.Join(stateDir, "pki", bootstrap.ClientPairPrefix+"-current.pem")
	info, err := os.Stat(pair)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the client key's file mode")
	cert := firstCertificate(t, pair)
	assert.Equal(t, "system:node:"+node, cert.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, cert.Subject.Organization)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "the client certificate is the cluster CA's")

	// The kubeconfig written acts as the node.
	cfg, err := clientcmd.BuildConfigFromFlags("", nodeKubeconfig)
	require.NoError(t, err)
	nodeClient, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:node:"+node, review.Status.UserInfo.Username, "the identity of the kubeconfig written")

	// The kubelet API, through the API server, which checks the serving
	// certificate against the cluster CA (a self-signed one is refused).
	var last string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "healthz").DoRaw(ctx)
		last = string(b)
		if err != nil {
			last = err.Error()
		}
		return err == nil && strings.TrimSpace(string(b)) == "ok", nil
	})
	require.NoError(t, err, "the API server reaches the kubelet API of %s; last: %s", node, last)
	t.Logf("kubelet API served with a signed certificate %v after the agent started", time.Since(start).Round(time.Millisecond))
	csrs, err = admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	serving := findCSR(csrs.Items, certificatesv1.KubeletServingSignerName, "system:node:"+node)
	require.NotNil(t, serving, "a serving CSR of the node: %v", csrNames(csrs.Items))
	assert.Equal(t, csrapprover.ReasonAutoApproved, approvedReason(serving), "the cluster's approver approved it")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		exited <- err
		require.NoError(t, err, "podkit-agent exits cleanly on SIGTERM")
	case <-ctx.Done():
		t.Fatal("podkit-agent did not exit on SIGTERM")
	}
	require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))
}

// findCSR returns the CSR of signer requested by user, or nil.
func findCSR(csrs []certificatesv1.CertificateSigningRequest, signer, user string) *certificatesv1.CertificateSigningRequest {
	for i := range csrs {
		if csrs[i].Spec.SignerName == signer && csrs[i].Spec.Username == user {
			return &csrs[i]
		}
	}
	return nil
}

func csrNames(csrs []certificatesv1.CertificateSigningRequest) []string {
	var out []string
	for _, c := range csrs {
		out = append(out, c.Name+" "+c.Spec.SignerName+" by "+c.Spec.Username)
	}
	return out
}

// approvedReason is the reason of csr's Approved condition, or "".
func approvedReason(csr *certificatesv1.CertificateSigningRequest) string {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == v1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

// firstCertificate parses the first certificate of the PEM file at path.
func firstCertificate(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		require.NotNil(t, block, "no certificate in %s", path)
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			require.NoError(t, err)
			return cert
		}
	}
}
