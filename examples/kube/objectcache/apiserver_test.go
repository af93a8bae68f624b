package objectcache_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// waitTimeout bounds each wait on the API server (the Node authorizer
// learns of a pod's binding, and so of what the node may read, a moment
// after the pod is stored).
const waitTimeout = time.Minute

// server is a real kube-apiserver over a real embedded etcd in the test
// process, authorizing with Node,RBAC and admitting with NodeRestriction:
// a node's client may read exactly what a kubelet may.
type server struct {
	admin  kubernetes.Interface
	config *rest.Config
	tokens map[string]string
}

// startServer starts etcd and kube-apiserver for the rest of t, with a
// bearer token for each node name.
func startServer(t *testing.T, nodes ...string) *server {
	t.Helper()
	s := &server{tokens: map[string]string{}}
	var lines []string
	for i, n := range nodes {
		tok := fmt.Sprintf("objectcache-token-%d", i)
		s.tokens[n] = tok
		lines = append(lines, fmt.Sprintf(`%s,system:node:%s,node-%d,"system:nodes"`, tok, n, i))
	}
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	require.NoError(t, os.WriteFile(tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	etcd := testserver.RunEtcd(t, nil)
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = etcd.Endpoints()
	srv := kubeapiservertesting.StartTestServerOrDie(t, nil, []string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--enable-admission-plugins=NodeRestriction",
		"--authorization-mode=Node,RBAC",
		"--token-auth-file=" + tokenFile,
	}, storage)
	t.Cleanup(srv.TearDownFn)
	s.config = rest.CopyConfig(srv.ClientConfig)
	s.admin = kubernetes.NewForConfigOrDie(s.config)
	return s
}

// node returns a client acting as system:node:<name>.
func (s *server) node(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	cfg := rest.AnonymousClientConfig(s.config)
	cfg.BearerToken = s.tokens[name]
	require.NotEmpty(t, cfg.BearerToken, "no token for node %s", name)
	return kubernetes.NewForConfigOrDie(cfg)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond (on the real API server) until it holds.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, cond)
	require.NoError(t, err, "waiting until %s", what)
}

// syncs records the UIDs RequestSync is called with.
type syncs struct {
	mu   sync.Mutex
	uids []types.UID
	ch   chan types.UID
}

func newSyncs() *syncs { return &syncs{ch: make(chan types.UID, 100)} }

func (s *syncs) request(uid types.UID) {
	s.mu.Lock()
	s.uids = append(s.uids, uid)
	s.mu.Unlock()
	s.ch <- uid
}

// next waits for the next sync request.
func (s *syncs) next(t *testing.T) types.UID {
	t.Helper()
	select {
	case uid := <-s.ch:
		return uid
	case <-time.After(waitTimeout):
		t.Fatal("no sync requested")
		return ""
	}
}

func testPod(ns, name, node string, spec func(*v1.PodSpec)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "robot",
			Containers:         []v1.Container{{Name: "main", Image: "none"}},
		},
	}
	spec(&p.Spec)
	return p
}

func secretEnv(name, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: "V_" + name, ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}}
}
