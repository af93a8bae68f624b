package clustertest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// waitTimeout bounds each wait of these tests: a CronJob runs at the next
// minute, and the machine may be loaded.
const waitTimeout = 3 * time.Minute

// TestCluster runs the control plane's controllers and its security on one
// cluster of two podkit nodes, as parallel subtests, each in a namespace of
// its own.
func TestCluster(t *testing.T) {
	c := startCluster(t, 2)
	for _, s := range []struct {
		name string
		run  func(*testing.T, *clustertest.Cluster)
	}{
		{"Version", testVersion},
		{"StatefulSetInOrder", testStatefulSetInOrder},
		{"CronJob", testCronJob},
		{"TTLAfterFinished", testTTLAfterFinished},
		{"NodePodCIDR", testNodePodCIDR},
		{"ServiceAccountTokenAndRootCA", testServiceAccountTokenAndRootCA},
		{"EtcdRefusesOtherClients", testEtcdRefusesOtherClients},
		{"PrivateFiles", testPrivateFiles},
		{"AddNodes", testAddNodes},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, c)
		})
	}
}

// startCluster starts a cluster of n nodes for the rest of t, and checks
// at the end that Close left nothing of it.
func startCluster(t *testing.T, n int) *clustertest.Cluster {
	start := time.Now()
	c, err := clustertest.Start(testContext(t), clustertest.Options{Nodes: clustertest.Nodes(n)})
	require.NoError(t, err)
	t.Logf("cluster of %d nodes ready in %v", n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		_, err := os.Stat(c.Dir())
		assert.ErrorIs(t, err, fs.ErrNotExist, "the cluster's directory is removed")
	})
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates the namespace name and waits for its default service
// account, without which no pod can be created in it.
func namespace(t *testing.T, c *clustertest.Cluster, name string) string {
	ctx := testContext(t)
	_, err := c.Admin().CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = clustertest.WaitFor(ctx, c.Admin().CoreV1().ServiceAccounts(name), "default",
		clustertest.Match("created", func(sa *v1.ServiceAccount) bool { return sa != nil }), waitTimeout)
	require.NoError(t, err)
	return name
}

// busybox is a container of the busybox image running script with sh, as
// Kubernetes' documentation writes them: the image is recorded, and sh is
// this machine's.
func busybox(name, script string) v1.Container {
	return v1.Container{Name: name, Image: "busybox:1.28", Command: []string{"/bin/sh", "-c", script}}
}

// testVersion: the API server reports the version of k8s.io/kubernetes
// the control plane is built from, not v0.0.0-master, as kubectl version
// shows it.
func testVersion(t *testing.T, c *clustertest.Cluster) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	require.NoError(t, err)
	want := strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(want, "v1."), "k8s.io/kubernetes is at %q", want)
	got, err := c.Admin().Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, want, got.GitVersion)
	assert.Equal(t, want, c.Version())
	assert.Equal(t, strings.Split(want, ".")[0][1:], got.Major)
	assert.Equal(t, strings.Split(want, ".")[1], got.Minor)
}

// testStatefulSetInOrder: a StatefulSet of 3 replicas (the default
// OrderedReady policy) governed by a headless Service creates web-0, then
// web-1 once web-0 is Ready, then web-2 once web-1 is; the endpoints
// controllers give the Service its EndpointSlice.
func testStatefulSetInOrder(t *testing.T, c *clustertest.Cluster) {
	ns := namespace(t, c, "statefulset")
	ctx := testContext(t)
	admin := c.Admin()
	labels := map[string]string{"app": "web"}
	_, err := admin.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{
			ClusterIP: v1.ClusterIPNone,
			Selector:  labels,
			Ports:     []v1.ServicePort{{Name: "web", Port: 80}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Every change of the set's pods, in the API server's order.
	watcher, err := admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		events []podEvent
	)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range watcher.ResultChan() {
			if p, ok := ev.Object.(*v1.Pod); ok {
				mu.Lock()
				events = append(events, podEvent{ev.Type, p.Name, podReady(p)})
				mu.Unlock()
			}
		}
	}()

	_, err = admin.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "web",
			Replicas:    ptr.To[int32](3),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{Containers: []v1.Container{
					busybox("nginx", "echo serving; exec sleep 3600"),
				}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	set, err := clustertest.WaitFor(ctx, admin.AppsV1().StatefulSets(ns), "web", clustertest.StatefulSetRolledOut(), waitTimeout)
	require.NoError(t, err)
	assert.Equal(t, int32(3), set.Status.ReadyReplicas)
	watcher.Stop()
	<-watched

	mu.Lock()
	defer mu.Unlock()
	for i, name := range []string{"web-1", "web-2"} {
		prev := []string{"web-0", "web-1"}[i]
		created, ready := firstEvent(events, name, func(e podEvent) bool { return e.typ == watch.Added }),
			firstEvent(events, prev, func(e podEvent) bool { return e.ready })
		require.GreaterOrEqual(t, ready, 0, "%s became Ready: %v", prev, events)
		require.GreaterOrEqual(t, created, 0, "%s was created: %v", name, events)
		assert.Greater(t, created, ready, "%s is created only once %s is Ready: %v", name, prev, events)
	}

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		slices, err := admin.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		return err == nil && len(slices.Items) > 0, nil
	})
	require.NoError(t, err, "the Service web has an EndpointSlice")
}

// podEvent is one change of a pod a watch saw.
type podEvent struct {
	typ   watch.EventType
	name  string
	ready bool
}

// firstEvent returns the index of the first event of the pod name that
// match selects, or -1.
func firstEvent(events []podEvent, name string, match func(podEvent) bool) int {
	for i, e := range events {
		if e.name == name && match(e) {
			return i
		}
	}
	return -1
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// testCronJob: the CronJob of Kubernetes' documentation (busybox, every
// minute, "date; echo Hello from the Kubernetes cluster") runs a Job to
// completion at the next minute, whose pod printed the greeting.
func testCronJob(t *testing.T, c *clustertest.Cluster) {
	ns := namespace(t, c, "cronjob")
	ctx := testContext(t)
	admin := c.Admin()
	_, err := admin.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: batchv1.CronJobSpec{
			Schedule:          "* * * * *",
			ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
				RestartPolicy: v1.RestartPolicyOnFailure,
				Containers:    []v1.Container{busybox("hello", "date; echo Hello from the Kubernetes cluster")},
			}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = clustertest.WaitFor(ctx, admin.BatchV1().CronJobs(ns), "hello", clustertest.CronJobSucceeded(), waitTimeout)
	require.NoError(t, err)

	jobs, err := admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, jobs.Items)
	job := jobs.Items[0]
	require.NotEmpty(t, job.OwnerReferences)
	assert.Equal(t, "hello", job.OwnerReferences[0].Name, "the CronJob made the Job")
	_, err = clustertest.WaitFor(ctx, admin.BatchV1().Jobs(ns), job.Name, clustertest.JobComplete(), waitTimeout)
	require.NoError(t, err)
	pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job.Name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	log, err := admin.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &v1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	assert.Contains(t, string(log), "Hello from the Kubernetes cluster\n")
}

// testTTLAfterFinished: a finished Job with ttlSecondsAfterFinished 0 is
// deleted by the TTL-after-finished controller.
func testTTLAfterFinished(t *testing.T, c *clustertest.Cluster) {
	ns := namespace(t, c, "ttl")
	ctx := testContext(t)
	jobs := c.Admin().BatchV1().Jobs(ns)
	_, err := jobs.Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To[int32](0),
			Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
				RestartPolicy: v1.RestartPolicyNever,
				Containers:    []v1.Container{busybox("once", "echo done")},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = clustertest.WaitFor(ctx, jobs, "once", clustertest.Gone[*batchv1.Job](), waitTimeout)
	require.NoError(t, err)
}

// testNodePodCIDR: node IPAM gives each Node a range of its own in the
// cluster's pod range.
func testNodePodCIDR(t *testing.T, c *clustertest.Cluster) {
	ctx := testContext(t)
	cluster := c.ClusterCIDR()
	seen := map[string]string{}
	for _, n := range c.Nodes() {
		node, err := clustertest.WaitFor(ctx, c.Admin().CoreV1().Nodes(), n.Name(),
			clustertest.Match("given a pod range", func(n *v1.Node) bool { return n != nil && n.Spec.PodCIDR != "" }), waitTimeout)
		require.NoError(t, err)
		r, err := netip.ParsePrefix(node.Spec.PodCIDR)
		require.NoError(t, err)
		assert.Equal(t, controlplane.NodeCIDRMaskSize, r.Bits())
		assert.True(t, cluster.Contains(r.Addr()), "%s is in %s", r, cluster)
		assert.NotContains(t, seen, r.String(), "one range per node")
		seen[r.String()] = n.Name()
	}
}

// testServiceAccountTokenAndRootCA: the token controller fills a
// service-account-token Secret (it has the service account key), and
// every namespace gets the cluster CA as kube-root-ca.crt.
func testServiceAccountTokenAndRootCA(t *testing.T, c *clustertest.Cluster) {
	ns := namespace(t, c, "tokens")
	ctx := testContext(t)
	secrets := c.Admin().CoreV1().Secrets(ns)
	_, err := secrets.Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "default-token", Annotations: map[string]string{v1.ServiceAccountNameKey: "default"}},
		Type:       v1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	secret, err := clustertest.WaitFor(ctx, secrets, "default-token",
		clustertest.Match("filled", func(s *v1.Secret) bool { return s != nil && len(s.Data[v1.ServiceAccountTokenKey]) > 0 }), waitTimeout)
	require.NoError(t, err)
	assert.Equal(t, c.AdminConfig().CAData, secret.Data[v1.ServiceAccountRootCAKey])

	cm, err := clustertest.WaitFor(ctx, c.Admin().CoreV1().ConfigMaps(ns), "kube-root-ca.crt",
		clustertest.Match("published", func(cm *v1.ConfigMap) bool { return cm != nil }), waitTimeout)
	require.NoError(t, err)
	assert.Equal(t, string(c.AdminConfig().CAData), cm.Data["ca.crt"])
}

// testEtcdRefusesOtherClients: etcd answers only a client with a
// certificate of its own CA: not plain HTTP, not TLS without a
// certificate, not a certificate of the cluster CA (the administrator's;
// a node's is of the same CA). Like a pod on the host's network, the test
// is a process of this machine. The API server's etcd client certificate
// is let in: the test can tell refusals from a dead etcd.
func testEtcdRefusesOtherClients(t *testing.T, c *clustertest.Cluster) {
	url := c.EtcdURL()
	require.True(t, strings.HasPrefix(url, "https://127.0.0.1:"), "etcd listens on loopback, with TLS: %s", url)
	files := controlplane.FilesIn(filepath.Join(c.Dir(), "control-plane"))
	etcdCA, err := os.ReadFile(files.EtcdCACert)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(etcdCA))
	get := func(scheme string, certs ...tls.Certificate) error {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs},
		}}
		res, err := client.Get(scheme + strings.TrimPrefix(url, "https") + "/version")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode >= 400 {
			return errors.New(res.Status)
		}
		return nil
	}
	assert.Error(t, get("http"), "plain HTTP is refused")
	assert.Error(t, get("https"), "TLS without a client certificate is refused")
	admin := c.AdminConfig()
	adminCert, err := tls.X509KeyPair(admin.CertData, admin.KeyData)
	require.NoError(t, err)
	assert.Error(t, get("https", adminCert), "a certificate of the cluster CA is refused")
	node, err := c.NodeConfig("any-node")
	require.NoError(t, err)
	nodeCert, err := tls.X509KeyPair(node.CertData, node.KeyData)
	require.NoError(t, err)
	assert.Error(t, get("https", nodeCert), "a node's certificate is refused")

	apiserverCert, err := tls.LoadX509KeyPair(files.APIServerEtcdClientCert, files.APIServerEtcdClientKey)
	require.NoError(t, err)
	assert.NoError(t, get("https", apiserverCert), "the API server's etcd client is let in")
}

// testPrivateFiles: the control plane's keys, certificates, kubeconfigs
// and etcd data are readable by their owner only (every directory 0700,
// every file 0600), and none of it is under a node's directory.
func testPrivateFiles(t *testing.T, c *clustertest.Cluster) {
	cp := filepath.Join(c.Dir(), "control-plane")
	files := controlplane.FilesIn(cp)
	for _, f := range []string{files.CACert, files.CAKey, files.APIServerKey, files.ServiceAccountKey, files.KubeletClientKey,
		files.APIServerEtcdClientKey, files.EtcdKey, files.AdminKubeconfig, files.ControllerManagerKubeconfig} {
		require.FileExists(t, f)
	}
	assert.Equal(t, files.AdminKubeconfig, c.Kubeconfig())
	for _, dir := range []string{c.Dir(), cp, filepath.Join(c.Dir(), "nodes")} {
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeDir|0o700, fi.Mode(), dir)
	}
	n := 0
	err := filepath.WalkDir(cp, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && fi.Mode() != fs.ModeDir|0o700:
			t.Errorf("directory %s has mode %v, want 0700", path, fi.Mode())
		case !d.IsDir() && fi.Mode().Perm()&0o077 != 0:
			t.Errorf("%s is open to others than its owner: %v", path, fi.Mode())
		case !d.IsDir() && !strings.Contains(path, "/etcd/") && fi.Mode() != 0o600:
			t.Errorf("%s has mode %v, want 0600", path, fi.Mode())
		}
		n++
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, n, 15, "the walk saw the control plane's files")
	for _, node := range c.Nodes() {
		rel, err := filepath.Rel(node.StateDir(), cp)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(rel, ".."), "the control plane (%s) is not under node %s's directory (%s)", cp, node.Name(), node.StateDir())
		fi, err := os.Stat(node.StateDir())
		require.NoError(t, err)
		assert.Equal(t, fs.ModeDir|0o700, fi.Mode(), node.StateDir())
	}
}

// testAddNodes: AddNodes starts several nodes at once and returns them,
// in order, once every one is Ready and schedulable, each with a Lease of
// its own.
func testAddNodes(t *testing.T, c *clustertest.Cluster) {
	ctx := testContext(t)
	nodes, err := c.AddNodes(ctx, clustertest.NodeOptions{Name: "many-a"}, clustertest.NodeOptions{Name: "many-b"})
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	for i, name := range []string{"many-a", "many-b"} {
		assert.Equal(t, name, nodes[i].Name())
		assert.Same(t, nodes[i], c.Node(name))
		node, err := c.Admin().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, taint := range node.Spec.Taints {
			assert.NotEqual(t, v1.TaintNodeNotReady, taint.Key, "%s is schedulable", name)
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue
		}
		assert.True(t, ready, "%s is Ready", name)
		_, err = c.Admin().CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		assert.NoError(t, err, "%s has its Lease", name)
	}
	_, err = c.AddNodes(ctx, clustertest.NodeOptions{Name: "many-a"})
	assert.ErrorContains(t, err, `clustertest: a node named "many-a" exists`)
}
