package serviceenv

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func service(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestVariables(t *testing.T) {
	services := []*v1.Service{
		service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("shop", "redis-primary", "10.96.3.4", v1.ServicePort{Port: 6379}, v1.ServicePort{Name: "metrics", Port: 9121, Protocol: v1.ProtocolUDP}),
		service("shop", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		service("other", "web", "10.96.5.5", v1.ServicePort{Port: 80}),
		service("v6", "api", "fd00::7", v1.ServicePort{Port: 8080}),
	}
	kubernetes := map[string]string{
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.96.0.1",
	}
	shop := map[string]string{
		"REDIS_PRIMARY_SERVICE_HOST":         "10.96.3.4",
		"REDIS_PRIMARY_SERVICE_PORT":         "6379",
		"REDIS_PRIMARY_SERVICE_PORT_METRICS": "9121",
		"REDIS_PRIMARY_PORT":                 "tcp://10.96.3.4:6379",
		"REDIS_PRIMARY_PORT_6379_TCP":        "tcp://10.96.3.4:6379",
		"REDIS_PRIMARY_PORT_6379_TCP_PROTO":  "tcp",
		"REDIS_PRIMARY_PORT_6379_TCP_PORT":   "6379",
		"REDIS_PRIMARY_PORT_6379_TCP_ADDR":   "10.96.3.4",
		"REDIS_PRIMARY_PORT_9121_UDP":        "udp://10.96.3.4:9121",
		"REDIS_PRIMARY_PORT_9121_UDP_PROTO":  "udp",
		"REDIS_PRIMARY_PORT_9121_UDP_PORT":   "9121",
		"REDIS_PRIMARY_PORT_9121_UDP_ADDR":   "10.96.3.4",
	}
	t.Run("the pod's namespace and the master service", func(t *testing.T) {
		want := map[string]string{}
		for k, v := range kubernetes {
			want[k] = v
		}
		for k, v := range shop {
			want[k] = v
		}
		assert.Equal(t, want, Variables(services, "shop", true), "no headless service, no other namespace's")
	})
	t.Run("enableServiceLinks false keeps the master service only", func(t *testing.T) {
		assert.Equal(t, kubernetes, Variables(services, "shop", false))
	})
	t.Run("a service named kubernetes of the pod's namespace wins", func(t *testing.T) {
		own := append(services, service("shop", "kubernetes", "10.96.9.9", v1.ServicePort{Port: 8443}))
		got := Variables(own, "shop", true)
		assert.Equal(t, "10.96.9.9", got["KUBERNETES_SERVICE_HOST"])
		assert.Equal(t, "tcp://10.96.9.9:8443", got["KUBERNETES_PORT"])
		got = Variables(own, "shop", false)
		assert.Equal(t, "10.96.0.1", got["KUBERNETES_SERVICE_HOST"], "without links, the default namespace's")
	})
	t.Run("IPv6 addresses are bracketed in URLs", func(t *testing.T) {
		got := Variables(services, "v6", true)
		assert.Equal(t, "fd00::7", got["API_SERVICE_HOST"])
		assert.Equal(t, "tcp://[fd00::7]:8080", got["API_PORT"])
	})
	t.Run("a service without ports has its host only", func(t *testing.T) {
		got := Variables([]*v1.Service{service("x", "bare", "10.96.1.1")}, "x", true)
		assert.Equal(t, map[string]string{"BARE_SERVICE_HOST": "10.96.1.1"}, got)
	})
}

func TestNewRefusesNil(t *testing.T) {
	_, err := New(nil, logr.Discard())
	assert.ErrorContains(t, err, "serviceenv: New needs a client")
}

// Env waits for the first list, then answers from the watch.
func TestSourceEnv(t *testing.T) {
	client := fake.NewClientset(service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Port: 443}))
	s, err := New(client, logr.Discard())
	require.NoError(t, err)
	_, err = s.Env(context.Background(), "app", true)
	assert.ErrorContains(t, err, "serviceenv: the cluster's services have not been read yet")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var env map[string]string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		env, err = s.Env(ctx, "app", true)
		return err == nil, nil
	}))
	assert.Equal(t, "10.96.0.1", env["KUBERNETES_SERVICE_HOST"])

	_, err = client.CoreV1().Services("app").Create(ctx, service("app", "db", "10.96.2.2", v1.ServicePort{Port: 5432}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		env, err = s.Env(ctx, "app", true)
		return err == nil && env["DB_SERVICE_HOST"] == "10.96.2.2", nil
	}), "a service created later is watched")
	cancel()
	require.NoError(t, <-done, "Run returns nil once ctx ends")
}

// The informer keeps a Service reduced to what its variables need, and
// the variables from a reduced Service are those of the whole one.
func TestSlimServiceKeepsTheVariables(t *testing.T) {
	full := service("shop", "redis-primary", "10.96.3.4",
		v1.ServicePort{Name: "redis", Port: 6379, TargetPort: intstr.FromInt32(6380), NodePort: 30000},
		v1.ServicePort{Name: "metrics", Port: 9121, Protocol: v1.ProtocolUDP})
	full.ResourceVersion, full.UID = "42", "uid-1"
	full.Labels = map[string]string{"app": "redis"}
	full.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"big":"json"}`}
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	full.Spec.Selector = map[string]string{"app": "redis"}
	full.Spec.Type = v1.ServiceTypeNodePort
	full.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.9"}}
	master := service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443})

	got, err := slimService(full)
	require.NoError(t, err)
	slim := got.(*v1.Service)
	assert.Equal(t, "42", slim.ResourceVersion, "the informer needs the resourceVersion")
	assert.Equal(t, types.UID("uid-1"), slim.UID)
	assert.Nil(t, slim.Labels)
	assert.Nil(t, slim.Annotations)
	assert.Nil(t, slim.ManagedFields)
	assert.Nil(t, slim.Spec.Selector)
	assert.Empty(t, slim.Status.LoadBalancer.Ingress)
	assert.Equal(t, intstr.IntOrString{}, slim.Spec.Ports[0].TargetPort)
	assert.Equal(t, Variables([]*v1.Service{master, full}, "shop", true), Variables([]*v1.Service{master, slim}, "shop", true))
	assert.Len(t, full.ManagedFields, 1, "the informer's object is not changed in place")

	marker := cache.DeletedFinalStateUnknown{Key: "shop/redis-primary", Obj: full}
	got, err = slimService(marker)
	require.NoError(t, err)
	assert.Equal(t, marker, got, "a deletion marker passes as it came")
}
