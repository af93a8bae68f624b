package kube_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// restartableServer is a kube-apiserver over an embedded etcd that a test
// can stop and start again on the same etcd, as an operator restarts the
// API server of a cluster. The test server listens on a new port and
// makes new certificates at each start, so clients reach it the way they
// reach a real control plane: through a fixed address (a TCP proxy, as a
// load balancer in front of the API server) and a serving certificate of
// the cluster's (given to every start), which they trust. The proxy drops
// every connection when the server stops and refuses new ones until it is
// back, so clients see the server away, not slow.
type restartableServer struct {
	storage *storagebackend.Config
	flags   []string
	proxy   *tcpProxy
	// caData is the serving certificate's CA, for clients.
	caData []byte
	tokens map[string]string

	srv *kubeapiservertesting.TestServer
	// admin talks to the current server directly, with full rights.
	admin *kubernetes.Clientset
}

// startRestartableServer starts etcd, the proxy and a first API server
// (Node,RBAC authorization, NodeRestriction, a token for each node), for
// the rest of t.
func startRestartableServer(t *testing.T, nodes ...string) *restartableServer {
	t.Helper()
	dir := t.TempDir()
	s := &restartableServer{tokens: map[string]string{}}
	var lines []string
	for i, n := range nodes {
		tok := fmt.Sprintf("restart-token-%d-%s", i, n)
		s.tokens[n] = tok
		lines = append(lines, fmt.Sprintf("%s,system:node:%s,restart-node-uid-%d,\"system:nodes\"", tok, n, i))
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	require.NoError(t, os.WriteFile(tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, []string{"localhost"})
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	s.caData = certPEM

	etcd := testserver.RunEtcd(t, nil)
	s.storage = storagebackend.NewDefaultConfig("/registry", nil)
	s.storage.Transport.ServerList = etcd.Endpoints()
	s.flags = []string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--enable-admission-plugins=NodeRestriction",
		"--authorization-mode=Node,RBAC",
		"--token-auth-file=" + tokenFile,
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
	}
	s.proxy = newTCPProxy(t)
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

// start starts an API server on the etcd and points the proxy at it.
func (s *restartableServer) start(t *testing.T) {
	t.Helper()
	begin := time.Now()
	s.srv = kubeapiservertesting.StartTestServerOrDie(t, &kubeapiservertesting.TestServerInstanceOptions{DisableInvariantChecks: true}, s.flags, s.storage)
	u, err := url.Parse(s.srv.ClientConfig.Host)
	require.NoError(t, err)
	s.admin = kubernetes.NewForConfigOrDie(rest.CopyConfig(s.srv.ClientConfig))
	s.proxy.setBackend(u.Host)
	t.Logf("kube-apiserver (re)started in %v on %s", time.Since(begin).Round(time.Millisecond), u.Host)
}

// stop stops the API server; the proxy drops its connections. etcd keeps
// running.
func (s *restartableServer) stop() {
	s.proxy.setBackend("")
	if s.srv != nil {
		s.srv.TearDownFn()
		s.srv = nil
	}
}

// nodeClient returns a clientset acting as system:node:<node>, through the
// proxy.
func (s *restartableServer) nodeClient(t *testing.T, node string) *kubernetes.Clientset {
	t.Helper()
	tok, ok := s.tokens[node]
	require.True(t, ok, "no token for node %q", node)
	return kubernetes.NewForConfigOrDie(&rest.Config{
		Host:            "https://" + s.proxy.addr(),
		BearerToken:     tok,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.caData},
		QPS:             1000,
		Burst:           1000,
	})
}

// tcpProxy forwards TCP connections from a fixed local address to a
// backend that can change or be absent. While there is no backend it does
// not listen, so clients are refused at once, as by a host whose API
// server is down.
type tcpProxy struct {
	t    *testing.T
	port int
	wg   sync.WaitGroup

	mu      sync.Mutex
	ln      net.Listener // nil while there is no backend
	backend string
	conns   map[net.Conn]struct{}
	closed  bool
}

func newTCPProxy(t *testing.T) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{t: t, port: ln.Addr().(*net.TCPAddr).Port, conns: map[net.Conn]struct{}{}}
	require.NoError(t, ln.Close())
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return fmt.Sprintf("127.0.0.1:%d", p.port) }

// setBackend forwards connections to addr from now on, or, with "", stops
// listening. Either way the open connections are dropped.
func (p *tcpProxy) setBackend(addr string) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = addr
	for c := range p.conns {
		c.Close()
	}
	switch {
	case addr == "" && p.ln != nil:
		p.ln.Close()
		p.ln = nil
	case addr != "" && p.ln == nil && !p.closed:
		// The port was free a moment ago; an outgoing connection may have
		// taken it since, for a while.
		var ln net.Listener
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			var err error
			ln, err = net.Listen("tcp", p.addr())
			return err == nil, nil
		})
		require.NoError(p.t, err, "listening on %s again", p.addr())
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.setBackend("")
	p.wg.Wait()
}

func (p *tcpProxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		backend := p.backend
		p.mu.Unlock()
		server, err := net.DialTimeout("tcp", backend, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.backend != backend || p.ln != ln {
			// Switched while dialling.
			p.mu.Unlock()
			client.Close()
			server.Close()
			continue
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// pipe copies from src to dst until either ends, then closes both.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
