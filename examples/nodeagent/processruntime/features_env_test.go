package processruntime_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/podenv"
)

// A container's environment comes from every source as on a kubelet:
// literal values with $(VAR) expansion, config map and secret keys,
// envFrom with a prefix, pod fields (the pod's IP among them), resource
// limits; its command's $(VAR) references are expanded. The main process
// writes what it got, which the test reads.
func TestEnvironmentFromEverySource(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	e.objects.setConfigMap("test", "app-config", map[string]string{"SPECIAL_LEVEL": "very", "LOG_LEVEL": "debug"})
	e.objects.setSecret("test", "db", map[string]string{"password": "s3cr3t", "user": "admin"})
	pod := featurePod("c", `env | sort > /tmp/env; echo "$(GREETING)" > /tmp/arg; exec sleep 600`)
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	c.EnvFrom = []v1.EnvFromSource{
		{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}},
		{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}},
	}
	c.Env = []v1.EnvVar{
		{Name: "NAME", Value: "world"},
		{Name: "GREETING", Value: "hello $(NAME)"},
		{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Key: "SPECIAL_LEVEL"}}},
		{Name: "DB_PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		{Name: "OPTIONAL", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: new(true)}}},
		{Name: "MY_POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "MY_POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "MY_NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "MY_SA", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
		{Name: "MY_APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
		{Name: "MEM_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
	}
	e.run(pod)
	e.waitRunning(pod, "c")
	eventually(t, 30*time.Second, "the container wrote its environment", func() bool {
		return e.execCode(pod, "c", "test", "-s", "/tmp/arg") == 0
	})
	env := map[string]string{}
	for _, line := range strings.Split(e.exec(pod, "c", "cat", "/tmp/env"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	ip := status(t, e.rt, pod.UID).PodIPs
	require.NotEmpty(t, ip, "the pod has an address on the pod network")
	for k, want := range map[string]string{
		"NAME": "world", "GREETING": "hello world", "LEVEL": "very", "DB_PASSWORD": "s3cr3t",
		"CFG_SPECIAL_LEVEL": "very", "CFG_LOG_LEVEL": "debug", "user": "admin", "password": "s3cr3t",
		"MY_POD_NAME": pod.Name, "MY_POD_IP": ip[0], "MY_NODE": "node", "MY_SA": "default", "MY_APP": "features",
		"MEM_LIMIT": "64",
	} {
		assert.Equal(t, want, env[k], k)
	}
	assert.NotContains(t, env, "OPTIONAL", "an optional reference to a missing secret defines nothing")
	assert.Equal(t, "hello world\n", e.exec(pod, "c", "cat", "/tmp/arg"), "$(GREETING) in the command is expanded")
	for _, ev := range e.rec.of(pod) {
		assert.NotContains(t, ev.message, "s3cr3t", "no secret in an event")
	}
}

// A container whose required config map key is missing waits in
// CreateContainerConfigError with the kubelet's message and a Failed
// event, the pod is not Failed, and the container starts once the key
// exists (the engine retries).
func TestMissingRequiredKeyWaitsInCreateContainerConfigError(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	pod := featurePod("c", `echo "$LEVEL" > /tmp/level; exec sleep 600`)
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "later"}, Key: "level"}}}}
	e.run(pod)
	var cs v1.ContainerStatus
	eventually(t, 30*time.Second, "the container waits", func() bool {
		cs = e.container(pod, "c")
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == podenv.ReasonCreateContainerConfigError
	})
	assert.Contains(t, cs.State.Waiting.Message, `"later" not found`)
	e.waitEvent(pod, "Failed", `"later" not found`)
	assert.NotEqual(t, v1.PodFailed, e.api(pod).Phase, "the pod does not fail for it")

	e.objects.setConfigMap("test", "later", map[string]string{"level": "5"})
	e.waitRunning(pod, "c")
	eventually(t, 30*time.Second, "the container got the key", func() bool {
		return e.execCode(pod, "c", "test", "-s", "/tmp/level") == 0
	})
	assert.Equal(t, "5\n", e.exec(pod, "c", "cat", "/tmp/level"))
	c, _ := status(t, e.rt, pod.UID).Container("c")
	assert.Equal(t, int32(0), c.RestartCount, "it waited, it did not crash")
	assert.Equal(t, processruntime.ContainerStateRunning, c.State)
}
