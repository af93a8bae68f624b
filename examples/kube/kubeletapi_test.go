package kube_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeletURL returns the base URL of a node's kubelet API, as the Node
// publishes it.
func kubeletURL(t *testing.T, h *harness, node string) string {
	t.Helper()
	n, err := h.c.Admin().CoreV1().Nodes().Get(testContextFor(t, clusterTimeout), node, metav1.GetOptions{})
	require.NoError(t, err)
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ip = a.Address
		}
	}
	require.NotEmpty(t, ip, "the node publishes an InternalIP: %+v", n.Status.Addresses)
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	require.NotZero(t, port, "the node publishes its kubelet port")
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

// get requests url with client and returns the status and body.
func get(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContextFor(t, clusterTimeout), http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// httpsClient trusts the cluster CA and presents certs, if any.
func httpsClient(t *testing.T, h *harness, certs ...tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(h.c.AdminConfig().CAData))
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
}

// foreignCert is a client certificate of a CA the cluster does not know,
// claiming to be an administrator.
func foreignCert(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "intruder", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// adminCert is the administrator's client certificate (system:masters),
// as the API server's kubelet client certificate is.
func adminCert(t *testing.T, h *harness) tls.Certificate {
	cfg := h.c.AdminConfig()
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	require.NoError(t, err)
	return cert
}

// testKubeletAPIAuth: the kubelet API lets in only what the API server
// authenticates and authorizes: anonymous requests and foreign
// certificates get 401, a service account gets what RBAC grants it on
// nodes/<subresource> and 403 for the rest, and the cluster's
// administrator certificate (what the API server presents) reads logs.
func testKubeletAPIAuth(t *testing.T, h *harness) {
	nodes := h.pool(t, "auth", 1)
	node := nodes[0].Name()
	ns := h.namespace(t, "auth")
	k := h.kubectl
	k.run(t, "run", "talker", "-n", ns, "--image=none", "--restart=Never", "--overrides="+overrides("auth"),
		"--command", "--", "/bin/sh", "-c", "echo hello; exec sleep 3600")
	waitPods(t, h.c.Admin(), ns, "run=talker", "Running", allRunning(1))
	base := kubeletURL(t, h, node)
	logs := base + "/containerLogs/" + ns + "/talker/talker"

	t.Run("Anonymous", func(t *testing.T) {
		anonymous := httpsClient(t, h)
		for _, path := range []string{"/healthz", "/metrics", "/containerLogs/" + ns + "/talker/talker"} {
			code, body := get(t, anonymous, base+path, "")
			assert.Equal(t, http.StatusUnauthorized, code, "%s: %s", path, body)
		}
		code, _ := get(t, httpsClient(t, h, foreignCert(t)), base+"/metrics", "")
		assert.Equal(t, http.StatusUnauthorized, code, "a certificate of a foreign CA")
		code, _ = get(t, anonymous, base+"/metrics", "not-a-token")
		assert.Equal(t, http.StatusUnauthorized, code, "a token the API server does not know")
	})

	t.Run("ServiceAccounts", func(t *testing.T) {
		k.run(t, "create", "serviceaccount", "-n", ns, "nobody")
		k.run(t, "create", "serviceaccount", "-n", ns, "scraper")
		k.run(t, "create", "clusterrole", "node-metrics", "--verb=get", "--resource=nodes/metrics")
		k.run(t, "create", "clusterrolebinding", "scraper-node-metrics", "--clusterrole=node-metrics", "--serviceaccount="+ns+":scraper")
		nobody := strings.TrimSpace(k.run(t, "create", "token", "-n", ns, "nobody"))
		scraper := strings.TrimSpace(k.run(t, "create", "token", "-n", ns, "scraper"))
		client := httpsClient(t, h)

		code, body := get(t, client, base+"/metrics", nobody)
		assert.Equal(t, http.StatusForbidden, code, body)
		assert.Contains(t, body, "user=system:serviceaccount:"+ns+":nobody")
		assert.Contains(t, body, "subresource(s)=[metrics]")

		code, body = get(t, client, base+"/metrics", scraper)
		assert.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, fmt.Sprintf(`kubelet_node_name{node=%q} 1`, node))
		code, body = get(t, client, logs, scraper)
		assert.Equal(t, http.StatusForbidden, code, "nodes/proxy is not granted: %s", body)
		code, body = get(t, client, base+"/healthz", scraper)
		assert.Equal(t, http.StatusForbidden, code, "neither nodes/healthz nor nodes/proxy is granted: %s", body)
		// The sessions are nodes/proxy's, the pod lists nodes/pods' (or
		// proxy's), the Summary API nodes/stats': each refused before
		// anything is upgraded or read, as logs are.
		for path, sub := range map[string]string{
			"/exec/" + ns + "/talker/talker?command=id&output=1": "proxy",
			"/attach/" + ns + "/talker/talker?output=1":          "proxy",
			"/portForward/" + ns + "/talker?port=80":             "proxy",
			"/pods":                                              "pods proxy", // nodes/pods, else nodes/proxy, as a kubelet 1.37 checks
			"/runningpods/":                                      "pods proxy",
			"/stats/summary":                                     "stats",
		} {
			code, body = get(t, client, base+path, scraper)
			assert.Equal(t, http.StatusForbidden, code, "%s: %s", path, body)
			assert.Contains(t, body, "subresource(s)=["+sub+"]", path)
		}
	})

	t.Run("APIServerCertificate", func(t *testing.T) {
		client := httpsClient(t, h, adminCert(t, h))
		code, body := get(t, client, logs, "")
		assert.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "hello\n", body)
		code, body = get(t, client, base+"/healthz", "")
		assert.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "ok", body)
		code, body = get(t, client, base+"/containerLogs/"+ns+"/nosuch/c", "")
		assert.Equal(t, http.StatusNotFound, code, body)
		code, body = get(t, client, logs+"?tailLines=-1", "")
		assert.Equal(t, http.StatusUnprocessableEntity, code, body)
	})
}

// scrape reads the node's /metrics through the API server's node proxy,
// with kubectl, as a person would; where the nodes serve on a loopback
// address (which the node proxy refuses) it asks the node directly, with
// the administrator's certificate.
func scrape(t *testing.T, h *harness, node string) map[string]*dto.MetricFamily {
	t.Helper()
	var text string
	if clusterNodeIP().IsLoopback() {
		code, body := get(t, httpsClient(t, h, adminCert(t, h)), kubeletURL(t, h, node)+"/metrics", "")
		require.Equal(t, http.StatusOK, code, body)
		text = body
	} else {
		text = h.kubectl.run(t, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/metrics")
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	return fams
}

// metric returns the metric of family name with exactly labels.
func metric(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	fam, ok := fams[name]
	require.True(t, ok, "metric %s is exported", name)
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)
		for k, v := range labels {
			if got[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	require.Failf(t, "no such series", "%s%v among %v", name, labels, fam.GetMetric())
	return nil
}

func gaugeValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	return metric(t, fams, name, labels).GetGauge().GetValue()
}

func histogramCount(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) uint64 {
	t.Helper()
	return metric(t, fams, name, labels).GetHistogram().GetSampleCount()
}

// testMetrics: /metrics, scraped as people do, counts what the test did
// on the node: three pods started and running, then one deleted.
func testMetrics(t *testing.T, h *harness) {
	nodes := h.pool(t, "metrics", 1)
	node := nodes[0].Name()
	ns := h.namespace(t, "metrics")
	admin := h.c.Admin()
	for i := range 3 {
		_, err := admin.CoreV1().Pods(ns).Create(testContextFor(t, clusterTimeout), &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Labels: map[string]string{"app": "m"}},
			Spec:       inPool(scriptSpec("exec sleep 3600"), "metrics"),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pods := waitPods(t, admin, ns, "app=m", "3 Running", allRunning(3))

	fams := scrape(t, h, node)
	assert.Equal(t, 1.0, gaugeValue(t, fams, "kubelet_node_name", map[string]string{"node": node}))
	assert.Equal(t, 3.0, gaugeValue(t, fams, "kubelet_working_pods", map[string]string{"lifecycle": "sync", "config": "desired", "static": ""}))
	assert.Equal(t, 0.0, gaugeValue(t, fams, "kubelet_working_pods", map[string]string{"lifecycle": "terminating", "config": "desired", "static": ""}))
	assert.Equal(t, uint64(3), histogramCount(t, fams, "kubelet_pod_start_duration_seconds", map[string]string{}))
	assert.Equal(t, uint64(3), histogramCount(t, fams, "kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": "create"}))
	assert.Equal(t, 3.0, gaugeValue(t, fams, "kubelet_running_pods", map[string]string{}))
	assert.Equal(t, 3.0, gaugeValue(t, fams, "kubelet_running_containers", map[string]string{"container_state": "running"}))
	assert.Equal(t, 3.0, gaugeValue(t, fams, "podkit_pod_workers", map[string]string{"stage": "syncing"}))
	assert.GreaterOrEqual(t, histogramCount(t, fams, "podkit_pod_worker_hook_duration_seconds", map[string]string{"hook": "SyncPod"}), uint64(3))
	_, ok := fams["process_resident_memory_bytes"]
	assert.True(t, ok, "the process collector is registered")
	for _, m := range fams["kubelet_pod_worker_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			assert.NotContains(t, []string{"kill", "terminated"}, l.GetValue(), "nothing was stopped yet")
		}
	}

	h.kubectl.run(t, "delete", "pod", "-n", ns, pods[0].Name)
	waitGone(t, admin, ns, pods[0].UID)
	fams = scrape(t, h, node)
	assert.Equal(t, 2.0, gaugeValue(t, fams, "kubelet_working_pods", map[string]string{"lifecycle": "sync", "config": "desired", "static": ""}))
	assert.Equal(t, 2.0, gaugeValue(t, fams, "kubelet_running_pods", map[string]string{}))
	assert.Equal(t, 2.0, gaugeValue(t, fams, "podkit_pod_workers", map[string]string{"stage": "syncing"}))
	// One pod stopped and cleaned up: its hooks ran (once each, unless
	// retried).
	assert.GreaterOrEqual(t, histogramCount(t, fams, "kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": "kill"}), uint64(1))
	assert.GreaterOrEqual(t, histogramCount(t, fams, "kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": "terminated"}), uint64(1))
	assert.GreaterOrEqual(t, histogramCount(t, fams, "podkit_pod_worker_hook_duration_seconds", map[string]string{"hook": "SyncTerminatedPod"}), uint64(1))
}
