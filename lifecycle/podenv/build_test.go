package podenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/podenv/podenvtest"
)

const ns = "team"

// objects returns a getter holding secret "db" (user, password) and
// config map "app" (mode, level, a binary key) in namespace ns.
func objects() *podenvtest.Objects {
	o := &podenvtest.Objects{}
	o.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Data: map[string][]byte{"user": []byte("admin"), "password": []byte("s3cret")}})
	o.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Data:       map[string]string{"mode": "fast", "level": "debug"},
		BinaryData: map[string][]byte{"blob": {1, 2}}})
	return o
}

// testPod returns a pod in ns with container c, whose env is env.
func testPod(c v1.Container) *v1.Pod {
	if c.Name == "" {
		c.Name = "main"
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "web-0", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "a \"quoted\" one"},
		},
		Spec: v1.PodSpec{
			NodeName: "node-a", ServiceAccountName: "robot",
			Containers: []v1.Container{c},
		},
	}
}

func build(t *testing.T, b *podenv.Builder, pod *v1.Pod, in podenv.Inputs) ([]podenv.EnvVar, error) {
	t.Helper()
	return b.Build(context.Background(), pod, &pod.Spec.Containers[0], in)
}

func fieldRef(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
}

func resourceRef(res, divisor string) *v1.EnvVarSource {
	fs := &v1.ResourceFieldSelector{Resource: res}
	if divisor != "" {
		fs.Divisor = resource.MustParse(divisor)
	}
	return &v1.EnvVarSource{ResourceFieldRef: fs}
}

func TestBuildValues(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	b, err := podenv.New(objects(), podenv.Options{NodeAllocatable: func() v1.ResourceList { return allocatable }})
	require.NoError(t, err)
	limited := v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi"), "hugepages-2Mi": resource.MustParse("4Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
	}
	in := podenv.Inputs{PodIPs: []string{"10.0.0.5", "fd00::5"}, HostIPs: []string{"192.168.1.2", "fd01::2"}}
	for _, tc := range []struct {
		name  string
		src   *v1.EnvVarSource
		res   v1.ResourceRequirements
		value string
	}{
		{"name", fieldRef("metadata.name"), limited, "web-0"},
		{"namespace", fieldRef("metadata.namespace"), limited, ns},
		{"uid", fieldRef("metadata.uid"), limited, "uid-1"},
		{"label", fieldRef("metadata.labels['app']"), limited, "web"},
		{"absent label", fieldRef("metadata.labels['nope']"), limited, ""},
		{"annotation", fieldRef("metadata.annotations['note']"), limited, `a "quoted" one`},
		{"labels", fieldRef("metadata.labels"), limited, "app=\"web\"\ntier=\"front\""},
		{"node", fieldRef("spec.nodeName"), limited, "node-a"},
		{"legacy spec.host", fieldRef("spec.host"), limited, "node-a"},
		{"service account", fieldRef("spec.serviceAccountName"), limited, "robot"},
		{"pod IP", fieldRef("status.podIP"), limited, "10.0.0.5"},
		{"pod IPs", fieldRef("status.podIPs"), limited, "10.0.0.5,fd00::5"},
		{"host IP", fieldRef("status.hostIP"), limited, "192.168.1.2"},
		{"host IPs", fieldRef("status.hostIPs"), limited, "192.168.1.2,fd01::2"},
		{"empty apiVersion is v1", &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}, limited, "web-0"},
		{"cpu limit in cores, rounded up", resourceRef("limits.cpu", ""), limited, "1"},
		{"cpu limit in millicores", resourceRef("limits.cpu", "1m"), limited, "250"},
		{"cpu request", resourceRef("requests.cpu", "1m"), limited, "100"},
		{"memory limit in Mi", resourceRef("limits.memory", "1Mi"), limited, "64"},
		{"memory limit in bytes", resourceRef("limits.memory", ""), limited, "67108864"},
		{"memory request in k, rounded up", resourceRef("requests.memory", "1k"), limited, "33555"},
		{"hugepages limit", resourceRef("limits.hugepages-2Mi", "1Mi"), limited, "4"},
		{"unset limit: allocatable", resourceRef("limits.ephemeral-storage", "1Gi"), limited, "100"},
		{"unset cpu limit: allocatable", resourceRef("limits.cpu", "1m"), v1.ResourceRequirements{}, "4000"},
		{"unset memory limit: allocatable", resourceRef("limits.memory", "1Gi"), v1.ResourceRequirements{}, "8"},
		{"unset request: 0", resourceRef("requests.ephemeral-storage", ""), limited, "0"},
		{"secret key", &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "password"}}, limited, "s3cret"},
		{"config map key", &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Key: "mode"}}, limited, "fast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.Container{Resources: tc.res, Env: []v1.EnvVar{{Name: "V", ValueFrom: tc.src}}})
			env, err := build(t, b, pod, in)
			require.NoError(t, err)
			require.Equal(t, []podenv.EnvVar{{"V", tc.value}}, env)
		})
	}
}

func TestBuildResourceOfAnotherContainerAndPodLimits(t *testing.T) {
	b, err := podenv.New(nil, podenv.Options{NodeAllocatable: func() v1.ResourceList {
		return v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}
	}})
	require.NoError(t, err)
	pod := testPod(v1.Container{Env: []v1.EnvVar{
		{Name: "SIDE_CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "side", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
		{Name: "MEM", ValueFrom: resourceRef("limits.memory", "1Mi")},
	}})
	pod.Spec.InitContainers = []v1.Container{{Name: "side", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m")}}}}
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("512Mi")}}
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{{"SIDE_CPU", "300"}, {"MEM", "512"}}, env, "an unset container limit reads the pod-level limit before the node's")

	pod.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.ContainerName = "ghost"
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "container ghost not found")
}

func TestBuildOrderAndOverrides(t *testing.T) {
	o := objects()
	o.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "more"}, Data: map[string]string{"mode": "slow", "zone": "z1"}})
	b, err := podenv.New(o, podenv.Options{ServiceEnv: func(_ context.Context, namespace string, links bool) (map[string]string, error) {
		require.Equal(t, ns, namespace)
		require.True(t, links, "nil enableServiceLinks reads as true")
		return map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "ZONE": "from-service", "B_SERVICE_PORT": "80", "mode": "from-service"}, nil
	}})
	require.NoError(t, err)
	pod := testPod(v1.Container{
		EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}},
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "more"}}},
			{Prefix: "DB_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}},
		},
		Env: []v1.EnvVar{
			{Name: "level", Value: "info"},
			{Name: "GREETING", Value: "$(mode) $(LATER) $(DB_user)@$(KUBERNETES_SERVICE_HOST) $$(mode) $(zone) $(ZONE)"},
			{Name: "LATER", Value: "later"},
			{Name: "ZONE", Value: "mine"},
			{Name: "level", Value: "warn"},
			{Name: "EMPTY"},
		},
	})
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{
		{"level", "warn"}, // envFrom "app" (sorted keys), then overridden twice by env
		{"mode", "slow"},  // "more" overrides "app"
		{"zone", "z1"},
		{"DB_password", "s3cret"},
		{"DB_user", "admin"},
		{"GREETING", "slow $(LATER) admin@10.96.0.1 $(mode) z1 from-service"}, // a later variable is not seen; a service one is
		{"LATER", "later"},
		{"ZONE", "mine"}, // the container's own wins over the service's
		{"EMPTY", ""},
		{"B_SERVICE_PORT", "80"}, // the rest of the service variables, sorted
		{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
	}, env)
}

func TestBuildOptionalReferences(t *testing.T) {
	b, err := podenv.New(objects(), podenv.Options{})
	require.NoError(t, err)
	optional := ptr.To(true)
	pod := testPod(v1.Container{
		EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: optional}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: optional}},
		},
		Env: []v1.EnvVar{
			{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: optional}}},
			{Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "nope", Optional: optional}}},
			{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: optional}}},
			{Name: "D", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Key: "blob", Optional: optional}}},
			{Name: "E", Value: "$(A)$(B)"},
		},
	})
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{{"E", "$(A)$(B)"}}, env, "an optional missing reference defines nothing; binaryData is not read")
}

// An optional key reference to an object that is missing, read for the
// first time (no envFrom read it before), defines nothing: it neither
// fails nor panics.
func TestBuildOptionalKeyOfAMissingObjectReadFirst(t *testing.T) {
	b, err := podenv.New(objects(), podenv.Options{})
	require.NoError(t, err)
	optional := ptr.To(true)
	pod := testPod(v1.Container{Env: []v1.EnvVar{
		{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: optional}}},
		{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: optional}}},
		{Name: "E", Value: "set"},
	}})
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{{"E", "set"}}, env)
}

// requireConfigError checks that err is a ConfigError of container main
// with the message msg.
func requireConfigError(t *testing.T, err error, msg string) *podenv.ConfigError {
	t.Helper()
	var ce *podenv.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "main", ce.Container)
	require.Equal(t, msg, ce.Message)
	require.Equal(t, podenv.ReasonCreateContainerConfigError, ce.Reason())
	require.True(t, podenv.IsConfigError(fmt.Errorf("wrapped: %w", err)))
	require.Equal(t, `podenv: container "main": `+msg, ce.Error())
	return ce
}

func TestBuildConfigErrors(t *testing.T) {
	b, err := podenv.New(objects(), podenv.Options{})
	require.NoError(t, err)
	secretKey := func(name, key string) []v1.EnvVar {
		return []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}}}}
	}
	configMapKey := func(name, key string) []v1.EnvVar {
		return []v1.EnvVar{{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}}}}
	}
	for _, tc := range []struct {
		name     string
		c        v1.Container
		in       podenv.Inputs
		msg      string
		notFound bool
	}{
		{name: "missing secret", c: v1.Container{Env: secretKey("nope", "k")}, msg: `secret "nope" not found`, notFound: true},
		{name: "missing secret key", c: v1.Container{Env: secretKey("db", "nope")}, msg: "couldn't find key nope in Secret team/db"},
		{name: "missing config map", c: v1.Container{Env: configMapKey("nope", "k")}, msg: `configmap "nope" not found`, notFound: true},
		{name: "missing config map key", c: v1.Container{Env: configMapKey("app", "nope")}, msg: "couldn't find key nope in ConfigMap team/app"},
		{name: "missing envFrom config map", c: v1.Container{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}}}, msg: `configmap "nope" not found`, notFound: true},
		{name: "missing envFrom secret", c: v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}}}, msg: `secret "nope" not found`, notFound: true},
		{name: "envFrom of nothing", c: v1.Container{EnvFrom: []v1.EnvFromSource{{Prefix: "X"}}}, msg: "envFrom[0] names neither a configMap nor a secret"},
		{name: "valueFrom of nothing", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{}}}}, msg: `environment variable "X": valueFrom names no source`},
		{name: "invalid name", c: v1.Container{Env: []v1.EnvVar{{Name: "A=B", Value: "x"}}}, msg: `invalid environment variable name "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='`},
		{name: "unsupported field", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fieldRef("status.phase")}}}, msg: "unsupported fieldPath: status.phase"},
		{name: "subscript of a name", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fieldRef("metadata.name['x']")}}}, msg: "field label does not support subscript: metadata.name['x']"},
		{name: "bad label key", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fieldRef("metadata.labels['a b']")}}}, msg: "invalid key subscript in metadata.labels['a b']: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
		{name: "bad version", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}}, msg: "unsupported pod version: v2"},
		{name: "host IP unknown", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: fieldRef("status.hostIP")}}}, msg: "host IP unknown"},
		{name: "unsupported resource", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: resourceRef("limits.gpu", "")}}}, msg: "unsupported container resource : limits.gpu"},
		{name: "negative divisor", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: resourceRef("limits.cpu", "-1")}}}, msg: `resourceFieldRef "limits.cpu": negative divisor -1`},
		{name: "fileKeyRef without volume files", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "v", Path: "p", Key: "K"}}}}}, msg: `fileKeyRef to volume "v": this node cannot read volume files for the environment`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := build(t, b, testPod(tc.c), tc.in)
			require.Nil(t, env)
			ce := requireConfigError(t, err, tc.msg)
			require.Equal(t, tc.notFound, apierrors.IsNotFound(ce.Err), "the getter's NotFound error is the cause")
		})
	}
}

func TestBuildBadInput(t *testing.T) {
	b, err := podenv.New(nil, podenv.Options{})
	require.NoError(t, err)
	_, err = b.Build(context.Background(), nil, &v1.Container{}, podenv.Inputs{})
	require.EqualError(t, err, "podenv: Build needs a pod and a container")
	require.False(t, podenv.IsConfigError(err), "a nil pod is the caller's bug, not a container to keep waiting")
	_, err = b.Build(context.Background(), &v1.Pod{}, nil, podenv.Inputs{})
	require.Error(t, err)

	_, err = podenv.New(nil, podenv.Options{MaxBytes: -1})
	require.EqualError(t, err, "podenv: Options.MaxBytes is -1; want 0 (the default, 2097152) or more")

	// No getter: even an optional reference fails, as on a kubelet with no client.
	pod := testPod(v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Optional: ptr.To(true)}}}})
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "couldn't get secret team/db, no getter for secrets")
	pod = testPod(v1.Container{Env: []v1.EnvVar{{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Key: "k"}}}}})
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "couldn't get configMap team/app, no getter for config maps")

	// A half-filled ObjectsFuncs fails honestly.
	b, err = podenv.New(podenv.ObjectsFuncs{}, podenv.Options{})
	require.NoError(t, err)
	_, err = build(t, b, pod, podenv.Inputs{})
	require.ErrorIs(t, err, podenv.ErrNoGetter)
}

func TestBuildSkipsInvalidEnvFromKeysWithAnEvent(t *testing.T) {
	o := objects()
	o.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "odd"}, Data: map[string]string{"ok": "1", "a=b": "2", "tab\there": "3"}})
	var events []string
	rec := event.RecorderFunc(func(obj runtime.Object, eventType, reason, msgFmt string, args ...any) {
		events = append(events, eventType+" "+reason+" "+fmt.Sprintf(msgFmt, args...))
	})
	b, err := podenv.New(o, podenv.Options{Recorder: rec})
	require.NoError(t, err)
	pod := testPod(v1.Container{EnvFrom: []v1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "odd"}}}}})
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{{"P_ok", "1"}}, env)
	require.Equal(t, []string{"Warning InvalidEnvironmentVariableNames Keys [P_a=b, P_tab\there] from the EnvFrom configMap team/odd were skipped since they are considered invalid environment variable names."}, events)
}

func TestBuildBounds(t *testing.T) {
	o := objects()
	o.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}, Data: map[string][]byte{"k": make([]byte, 1<<20+1)}})
	o.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}, Data: map[string]string{"k": strings.Repeat("x", 1<<20)}})
	o.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Data: map[string]string{"BIG": strings.Repeat("x", 600)}})
	o.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nul"}, Data: map[string][]byte{"k": []byte("a\x00b")}})
	b, err := podenv.New(o, podenv.Options{MaxBytes: 1000})
	require.NoError(t, err)

	_, err = build(t, b, testPod(v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "huge"}}}}}), podenv.Inputs{})
	requireConfigError(t, err, "secret team/huge holds 1048577 bytes of data and 1 of keys, more than the 1048576 the API allows")
	_, err = build(t, b, testPod(v1.Container{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "huge"}}}}}), podenv.Inputs{})
	requireConfigError(t, err, "configmap team/huge holds 1048577 bytes, more than the 1048576 the API allows")

	bigFrom := []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "big"}}}}
	env, err := build(t, b, testPod(v1.Container{EnvFrom: bigFrom}), podenv.Inputs{})
	require.NoError(t, err, "605 bytes fit in 1000")
	require.Len(t, env, 1)
	_, err = build(t, b, testPod(v1.Container{EnvFrom: append(bigFrom, v1.EnvFromSource{Prefix: "AGAIN_", ConfigMapRef: bigFrom[0].ConfigMapRef})}), podenv.Inputs{})
	requireConfigError(t, err, `the environment is larger than 1000 bytes (at variable "AGAIN_BIG")`)
	_, err = build(t, b, testPod(v1.Container{EnvFrom: bigFrom, Env: []v1.EnvVar{{Name: "X", Value: "$(BIG)"}}}), podenv.Inputs{})
	requireConfigError(t, err, `the environment is larger than 1000 bytes (expanding variable "X")`)

	_, err = build(t, b, testPod(v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nul"}}}}}), podenv.Inputs{})
	ce := requireConfigError(t, err, `the value of environment variable "k" holds a NUL byte, which no process environment can carry`)
	require.NotContains(t, ce.Error(), "a\x00b", "a secret's value is never in an error")
}

func TestBuildSurvivesPanickingCallbacks(t *testing.T) {
	panicking := podenv.ObjectsFuncs{
		Secret: func(context.Context, string, string) (*v1.Secret, error) { panic("getter bug") },
		ConfigMap: func(context.Context, string, string) (*v1.ConfigMap, error) {
			return nil, nil // neither an object nor an error
		},
	}
	b, err := podenv.New(panicking, podenv.Options{
		ServiceEnv: func(context.Context, string, bool) (map[string]string, error) { panic("service bug") },
	})
	require.NoError(t, err)
	pod := testPod(v1.Container{Env: []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "k"}}}}})
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "couldn't read the service variables: ServiceEnv panicked: service bug")

	b, err = podenv.New(panicking, podenv.Options{NodeAllocatable: func() v1.ResourceList { panic("allocatable bug") }})
	require.NoError(t, err)
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "GetSecret team/db panicked: getter bug")

	pod = testPod(v1.Container{Env: []v1.EnvVar{{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Key: "k"}}}}})
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "GetConfigMap team/app returned neither an object nor an error")

	pod = testPod(v1.Container{Env: []v1.EnvVar{{Name: "M", ValueFrom: resourceRef("limits.memory", "")}}})
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err, "a panicking NodeAllocatable leaves no default")
	require.Equal(t, []podenv.EnvVar{{"M", "0"}}, env)
}

func TestBuildTransientGetterErrorIsRetried(t *testing.T) {
	o := objects()
	o.SetError(podenvtest.KindSecret, ns, "db", errors.New("failed to sync secret cache: timed out waiting for the condition"))
	b, err := podenv.New(o, podenv.Options{})
	require.NoError(t, err)
	optional := ptr.To(true)
	pod := testPod(v1.Container{Env: []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "user", Optional: optional}}}}})
	_, err = build(t, b, pod, podenv.Inputs{})
	requireConfigError(t, err, "failed to sync secret cache: timed out waiting for the condition")
	o.SetError(podenvtest.KindSecret, ns, "db", nil)
	env, err := build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err, "the next build, at the next sync, succeeds")
	require.Equal(t, []podenv.EnvVar{{"S", "admin"}}, env)
}

func TestBuildReadsEachObjectOnce(t *testing.T) {
	o := objects()
	b, err := podenv.New(o, podenv.Options{})
	require.NoError(t, err)
	ref := v1.LocalObjectReference{Name: "db"}
	pod := testPod(v1.Container{
		EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref}}},
		Env: []v1.EnvVar{
			{Name: "U", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref, Key: "user"}}},
			{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref, Key: "password"}}},
		},
	})
	_, err = build(t, b, pod, podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, 1, o.Reads(podenvtest.KindSecret, ns, "db"), "one read per object per Build, so the values agree")
}

// volumeFiles serves env files from a map, by volume and path.
type volumeFiles map[string]string

func (f volumeFiles) OpenVolumeFile(uid types.UID, volume, path string) (io.ReadCloser, error) {
	if uid != "uid-1" {
		return nil, fmt.Errorf("wrong pod %s", uid)
	}
	data, ok := f[volume+"/"+path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return io.NopCloser(strings.NewReader(data)), nil
}

func TestBuildFileKeyRef(t *testing.T) {
	files := volumeFiles{
		"config/app.env": "# settings\n\nMODE='fast'\nGREETING='hello\nworld' # two lines\nBLANK= 'ignored'\nEMPTY=''\n",
		"config/bad.env": "MODE=fast\n",
		"config/big.env": strings.Repeat("#", 2000),
	}
	b, err := podenv.New(nil, podenv.Options{VolumeFiles: files, MaxBytes: 1000})
	require.NoError(t, err)
	ref := func(path, key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "config", Path: path, Key: key, Optional: ptr.To(optional)}}
	}
	withVolume := func(c v1.Container) *v1.Pod {
		p := testPod(c)
		p.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		return p
	}
	env, err := build(t, b, withVolume(v1.Container{Env: []v1.EnvVar{
		{Name: "MODE", ValueFrom: ref("app.env", "MODE", false)},
		{Name: "GREETING", ValueFrom: ref("app.env", "GREETING", false)},
		{Name: "BLANK", ValueFrom: ref("app.env", "BLANK", false)},
		{Name: "EMPTY", ValueFrom: ref("app.env", "EMPTY", false)},
		{Name: "ABSENT", ValueFrom: ref("app.env", "ABSENT", true)},
		{Name: "NOFILE", ValueFrom: ref("gone.env", "X", true)},
	}}), podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{{"MODE", "fast"}, {"GREETING", "hello\nworld"}, {"BLANK", ""}, {"EMPTY", ""}}, env)

	for _, tc := range []struct {
		src *v1.EnvVarSource
		msg string
	}{
		{ref("app.env", "ABSENT", false), `environment variable key "ABSENT" not found in file "app.env" of volume "config"`},
		{ref("gone.env", "X", false), `couldn't read env file "gone.env" of volume "config": open gone.env: file does not exist`},
		{ref("bad.env", "MODE", false), `couldn't parse env file "bad.env" of volume "config": line 1: value must be enclosed in single quotes`},
		{ref("big.env", "MODE", false), `env file "big.env" of volume "config" is larger than 1000 bytes`},
	} {
		_, err := build(t, b, withVolume(v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: tc.src}}}), podenv.Inputs{})
		requireConfigError(t, err, tc.msg)
	}
	_, err = build(t, b, testPod(v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("app.env", "MODE", false)}}}), podenv.Inputs{})
	requireConfigError(t, err, `cannot find the volume "config" referenced by FileKeyRef`)
}

func TestBuildIsSafeForConcurrentUse(t *testing.T) {
	b, err := podenv.New(objects(), podenv.Options{})
	require.NoError(t, err)
	pod := testPod(v1.Container{
		EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}}},
		Env:     []v1.EnvVar{{Name: "X", Value: "$(user)"}},
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				env, err := b.Build(context.Background(), pod, &pod.Spec.Containers[0], podenv.Inputs{})
				if err != nil || len(env) != 3 || env[2].Value != "admin" {
					t.Errorf("Build = %v, %v", env, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
