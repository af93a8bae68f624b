package clustertest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// metrics-server's identity, Service and the API it serves.
const (
	metricsServerUser = "system:metrics-server"
	metricsServerName = "metrics-server"
	metricsAPIGroup   = "metrics.k8s.io"
	metricsAPIVersion = "v1beta1"
	// metricsResolution is how often metrics-server scrapes the nodes,
	// its minimum; kubectl top answers for a node or pod after two
	// scrapes. metricsScrapeTimeout bounds one scrape: metrics-server
	// refuses a resolution under 10/9 of it (its default, 10s, would
	// need 12s).
	metricsResolution     = "10s"
	metricsScrapeTimeout  = "5s"
	metricsServerStartTTL = time.Minute
	metricsServerStopTTL  = 10 * time.Second
)

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// metricsServer is a running metrics-server process.
type metricsServer struct {
	cmd  *exec.Cmd
	tail *tailWriter
	// exited is closed once the process has ended, with err its
	// cmd.Wait's.
	exited <-chan struct{}
	err    error
}

// startMetricsServer runs metrics-server (binary) on NodeIP as the
// resource metrics API (metrics.k8s.io/v1beta1, aggregated by the API
// server), scraping the nodes' /metrics/resource with its own identity:
// what kubectl top reads. It writes its certificates and kubeconfig into
// the control plane's directory dir, creates its RBAC (the rules of
// metrics-server's own manifests), its Service and Endpoints (the API
// server routes to the endpoint, --enable-aggregator-routing) and the
// APIService.
func (c *Cluster) startMetricsServer(ctx context.Context, binary, dir string) (*metricsServer, error) {
	files := controlplane.FilesIn(dir)
	pki := filepath.Join(dir, controlplane.PKIDir)
	certFile, keyFile := filepath.Join(pki, "metrics-server.crt"), filepath.Join(pki, "metrics-server.key")
	svcName := metricsServerName + "." + metav1.NamespaceSystem + ".svc"
	if err := issueAndWrite(c.ca.servingCert(metricsServerName, []net.IP{c.opts.NodeIP}, []string{svcName}))(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("clustertest: metrics-server's certificate: %w", err)
	}
	kubeconfig := filepath.Join(dir, "metrics-server.kubeconfig")
	if err := c.writeUserKubeconfig(kubeconfig, c.adminConfig.Host, metricsServerUser); err != nil {
		return nil, err
	}
	if err := c.createMetricsServerRBAC(ctx); err != nil {
		return nil, err
	}
	port, err := freePort(c.opts.NodeIP)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--bind-address=" + c.opts.NodeIP.String(),
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port",
		"--kubelet-certificate-authority=" + files.CACert,
		"--metric-resolution=" + metricsResolution,
		"--kubelet-request-timeout=" + metricsScrapeTimeout,
	}
	m := &metricsServer{tail: &tailWriter{max: 50}}
	log := c.opts.ControlPlaneLog
	if log == nil {
		log = io.Discard
	}
	m.cmd = exec.Command(binary, args...)
	m.cmd.Stdout = io.MultiWriter(log, m.tail)
	m.cmd.Stderr = m.cmd.Stdout
	m.cmd.SysProcAttr = childProcAttr()
	if m.exited, err = startChild(m.cmd, &m.err); err != nil {
		return nil, fmt.Errorf("clustertest: starting metrics-server: %w", err)
	}
	if err := m.waitServing(ctx, net.JoinHostPort(c.opts.NodeIP.String(), strconv.Itoa(port))); err != nil {
		return nil, errors.Join(err, m.stop())
	}
	if err := c.registerMetricsAPI(ctx, port); err != nil {
		return nil, errors.Join(err, m.stop())
	}
	if err := c.waitMetricsAPIAvailable(ctx, m); err != nil {
		return nil, errors.Join(err, m.stop())
	}
	return m, nil
}

// waitMetricsAPIAvailable waits until the API server reports the APIService
// of metrics.k8s.io Available (its aggregator reached metrics-server
// through the Endpoints), and fails with the condition's last message and
// metrics-server's output after metricsServerStartTTL. Until then the API
// server leaves the group out of its discovery, and kubectl, which caches
// discovery for hours in its home directory, would go on saying "Metrics
// API not available" after it became available.
func (c *Cluster) waitMetricsAPIAvailable(ctx context.Context, m *metricsServer) error {
	dyn, err := dynamic.NewForConfig(c.adminConfig)
	if err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	name := metricsAPIVersion + "." + metricsAPIGroup
	return m.await(ctx, "the APIService "+name+" to be available", 200*time.Millisecond, func() (bool, string) {
		svc, err := dyn.Resource(apiServiceResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, reason, message, ok := apiServiceAvailable(svc)
		if !ok {
			return false, "no status yet"
		}
		return status == string(metav1.ConditionTrue), fmt.Sprintf("Available=%s (%s: %s)", status, reason, message)
	})
}

// apiServiceAvailable returns the status, reason and message of an
// APIService's Available condition, and whether it has one.
func apiServiceAvailable(svc *unstructured.Unstructured) (status, reason, message string, ok bool) {
	conditions, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
	for _, c := range conditions {
		cond, isMap := c.(map[string]any)
		if !isMap || cond["type"] != "Available" {
			continue
		}
		status, _ = cond["status"].(string)
		reason, _ = cond["reason"].(string)
		message, _ = cond["message"].(string)
		return status, reason, message, true
	}
	return "", "", "", false
}

// waitServing waits until metrics-server accepts connections at addr, and
// fails with its output if it exits first (a bad flag) or takes longer
// than metricsServerStartTTL.
func (m *metricsServer) waitServing(ctx context.Context, addr string) error {
	return m.await(ctx, "metrics-server to listen on "+addr, 100*time.Millisecond, func() (bool, string) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
}

// await checks cond every interval until it holds, and fails with what
// cond saw last and metrics-server's output if metrics-server exits
// first, after metricsServerStartTTL, or when ctx ends.
func (m *metricsServer) await(ctx context.Context, what string, interval time.Duration, cond func() (ok bool, saw string)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	deadline := time.NewTimer(metricsServerStartTTL)
	defer deadline.Stop()
	for {
		ok, saw := cond()
		if ok {
			return nil
		}
		select {
		case <-m.exited:
			return fmt.Errorf("clustertest: metrics-server exited (%v) while waiting for %s: %s", m.err, what, m.tail.String())
		case <-deadline.C:
			return fmt.Errorf("clustertest: waited %v for %s: last %s; metrics-server's output: %s", metricsServerStartTTL, what, saw, m.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("clustertest: waiting for %s: %w (last %s)", what, ctx.Err(), saw)
		case <-ticker.C:
		}
	}
}

// createMetricsServerRBAC gives metrics-server what its manifests give it:
// reading nodes, pods and the nodes' metrics, delegating authentication
// and authorization, and reading the API server's front-proxy CA.
func (c *Cluster) createMetricsServerRBAC(ctx context.Context) error {
	user := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: metricsServerUser}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	// Everyone who may view pods may read their metrics, as metrics-
	// server's aggregated-metrics-reader role says.
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:aggregated-metrics-reader", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-admin": "true",
			"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
			"rbac.authorization.k8s.io/aggregate-to-view":  "true",
		}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{metricsAPIGroup}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}
	rbac := c.admin.RbacV1()
	steps := []func() error{
		func() error { _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); return err },
		func() error { _, err := rbac.ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); return err },
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsServerUser},
				Subjects:   user,
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: metricsServerName + ":system:auth-delegator"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
				Subjects:   user,
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.RoleBindings(metav1.NamespaceSystem).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: metricsServerName + "-auth-reader"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
				Subjects:   user,
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clustertest: metrics-server's RBAC: %w", err)
		}
	}
	return nil
}

// registerMetricsAPI creates metrics-server's Service (no selector), its
// Endpoints at NodeIP:port and the APIService of metrics.k8s.io/v1beta1,
// verified against the cluster CA.
func (c *Cluster) registerMetricsAPI(ctx context.Context, port int) error {
	// The API server warns that v1 Endpoints are deprecated, which
	// client-go would print on the standard error of every program
	// starting a cluster (podkit-cluster's terminal): this client drops
	// the warnings.
	quiet := rest.CopyConfig(c.adminConfig)
	quiet.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(quiet)
	if err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	core := client.CoreV1()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: metav1.NamespaceSystem},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{
			Name: "https", Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(port)),
		}}},
	}
	if _, err := core.Services(metav1.NamespaceSystem).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("clustertest: metrics-server's Service: %w", err)
	}
	//nolint:staticcheck // The Endpoints are mirrored into an EndpointSlice by the controller manager.
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: metav1.NamespaceSystem},
		Subsets: []v1.EndpointSubset{{
			Addresses: []v1.EndpointAddress{{IP: c.opts.NodeIP.String()}},
			Ports:     []v1.EndpointPort{{Name: "https", Port: int32(port), Protocol: v1.ProtocolTCP}},
		}},
	}
	if _, err := core.Endpoints(metav1.NamespaceSystem).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("clustertest: metrics-server's Endpoints: %w", err)
	}
	dyn, err := dynamic.NewForConfig(c.adminConfig)
	if err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": metricsAPIVersion + "." + metricsAPIGroup},
		"spec": map[string]any{
			"group":                metricsAPIGroup,
			"version":              metricsAPIVersion,
			"service":              map[string]any{"name": metricsServerName, "namespace": metav1.NamespaceSystem, "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(c.ca.certPEM),
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
		},
	}}
	if _, err := dyn.Resource(apiServiceResource).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("clustertest: the APIService of %s: %w", metricsAPIGroup, err)
	}
	return nil
}

// stop stops metrics-server: SIGTERM, then SIGKILL after
// metricsServerStopTTL. It may be called more than once.
func (m *metricsServer) stop() error {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(metricsServerStopTTL)
	defer timer.Stop()
	select {
	case <-m.exited:
		return nil // its exit status after SIGTERM says nothing
	case <-timer.C:
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
		return fmt.Errorf("clustertest: metrics-server did not stop within %v and was killed; its last output: %s", metricsServerStopTTL, m.tail.String())
	}
}

// freePort returns a TCP port free on ip at the moment of the call.
func freePort(ip net.IP) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return 0, fmt.Errorf("clustertest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
