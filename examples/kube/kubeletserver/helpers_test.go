package kubeletserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// The users the fake API server knows. admin has every subresource of the
// node; the others what their names say. The API server's own kubelet
// client certificate is admin's.
const (
	userAdmin    = "admin"
	userScraper  = "scraper"  // nodes/metrics and nodes/stats
	userNobody   = "nobody"   // nothing
	userDenyFail = "denyfail" // the SubjectAccessReview fails
	tokenScraper = "scraper-token"
	tokenNobody  = "nobody-token"
	tokenFail    = "fail-token"
)

// pki is a CA and what it signs, for one test.
type pki struct {
	caCert   *x509.Certificate
	caKey    *ecdsa.PrivateKey
	caPEM    []byte
	serving  tls.Certificate
	client   tls.Certificate // CN admin
	certData []byte          // client's PEM
	keyData  []byte
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &pki{caCert: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	p.serving, _, _ = p.sign(t, pkix.Name{CommonName: "node"}, x509.ExtKeyUsageServerAuth)
	p.client, p.certData, p.keyData = p.sign(t, pkix.Name{CommonName: userAdmin, Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth)
	return p
}

// sign returns a certificate of the CA for subject (with the 127.0.0.1
// SAN), and its PEM.
func (p *pki) sign(t *testing.T, subject pkix.Name, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
	return signWith(t, p.caCert, p.caKey, subject, usage)
}

func signWith(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, subject pkix.Name, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if ca == nil {
		ca, caKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return cert, certPEM, keyPEM
}

// fakeAPIServer answers TokenReviews and SubjectAccessReviews as an API
// server would for the test's users (the reviews go over REST, so a
// clientset fake cannot stand in), until t ends.
func fakeAPIServer(t *testing.T) kubernetes.Interface {
	users := map[string]string{tokenScraper: userScraper, tokenNobody: userNobody, tokenFail: userDenyFail}
	grants := map[string]map[string]bool{
		userAdmin:   {"proxy": true, "metrics": true, "stats": true, "healthz": true, "pods": true},
		userScraper: {"metrics": true, "stats": true},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if u, ok := users[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u}}
		}
		writeObject(w, &tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if sar.Spec.User == userDenyFail {
			http.Error(w, "the authorizer is unreachable", http.StatusBadRequest)
			return
		}
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra != nil && ra.Resource == "nodes" && ra.Name == "node-a" && grants[sar.Spec.User][ra.Subresource]
		writeObject(w, &sar)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	// The fake speaks JSON only.
	c, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	require.NoError(t, err)
	return c
}

func writeObject(w http.ResponseWriter, obj any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(obj)
}

// node is a running kubelet API for one test.
type node struct {
	pki  *pki
	url  string // https://127.0.0.1:port
	addr string
	srv  *kubeletserver.Server
	// stop ends Serve and waits for it to return; it is registered with
	// t.Cleanup and may be called earlier.
	stop func() error
}

// pods is a fixed set of pods, by namespace/name.
type pods map[string]*v1.Pod

func (p pods) get(namespace, name string) (*v1.Pod, bool) {
	pod, ok := p[namespace+"/"+name]
	return pod, ok
}

// testPod returns a pod with containers named as given.
func testPod(namespace, name string, containers ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
	}
	return pod
}

// startNode serves opts (completed with the test's PKI, client and node
// name) on a free loopback port.
func startNode(t *testing.T, opts kubeletserver.Options) *node {
	t.Helper()
	p := newPKI(t)
	opts.NodeName = "node-a"
	opts.Certificate = p.serving
	opts.ClientCA = p.caPEM
	if opts.Client == nil {
		opts.Client = fakeAPIServer(t)
	}
	if opts.Pods == nil {
		opts.Pods = pods{}.get
	}
	srv, err := kubeletserver.New(opts)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() { require.NoError(t, stop()) })
	return &node{pki: p, url: "https://" + l.Addr().String(), addr: l.Addr().String(), srv: srv, stop: stop}
}

// tlsConfig trusts the node and presents certs.
func (n *node) tlsConfig(certs ...tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(n.pki.caCert)
	return &tls.Config{RootCAs: pool, Certificates: certs, NextProtos: []string{"http/1.1"}}
}

// client is an HTTPS client of the node with certs; each test request
// gets a connection of its own unless keepAlive.
func (n *node) client(certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: n.tlsConfig(certs...), MaxConnsPerHost: 0, MaxIdleConnsPerHost: 1000}}
}

// admin is a client with the API server's kubelet client certificate.
func (n *node) admin() *http.Client { return n.client(n.pki.client) }

// restConfig is a client-go config for the node as admin (for the
// remotecommand and portforward clients).
func (n *node) restConfig() *rest.Config {
	return &rest.Config{Host: n.url, TLSClientConfig: rest.TLSClientConfig{
		CAData: n.pki.caPEM, CertData: n.pki.certData, KeyData: n.pki.keyData,
	}}
}

// get requests path and returns the status and body.
func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}
