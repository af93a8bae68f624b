package processruntime_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/volume"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// featureEnv is a whole agent over a sandboxed process runtime with a pod
// network: lifecycle.NewAgent with the per-pod features (the runtime as
// their ExecRunner, a settable getter of secrets and config maps, a fake
// TokenRequester, volumes under the runtime's VolumeRoot), the runtime's
// exits asking for syncs, and every event kept. The test sets the pods.
type featureEnv struct {
	t       *testing.T
	rt      *processruntime.Runtime
	agent   *lifecycle.Agent[processruntime.PodStatus]
	objects *fakeObjects
	rec     *recorded
	ctx     context.Context
}

// newFeatureEnv starts the agent; it stops when the test ends, after its
// pods were removed (the sandboxes, cgroups and network go with them).
func newFeatureEnv(t *testing.T) *featureEnv {
	t.Helper()
	cidr := podrangetest.Range(t)
	e := &featureEnv{t: t, objects: newFakeObjects(), rec: &recorded{}}
	var agent *lifecycle.Agent[processruntime.PodStatus]
	var mu sync.Mutex
	e.rt = sandboxed(t, processruntime.Options{
		PodCIDR: cidr, BridgeName: podrangetest.Bridge(t, "pkt"),
		BackOff: 200 * time.Millisecond,
		OnEvent: func(ev processruntime.Event) {
			e.rec.runtime(ev)
			mu.Lock()
			a := agent
			mu.Unlock()
			if a != nil && (ev.Type == processruntime.ContainerExited || ev.Type == processruntime.ContainerStarted) {
				a.RequestSync(ev.UID)
			}
		},
	})
	t.Cleanup(func() { require.NoError(t, e.rt.TeardownNetwork(context.Background())) })
	var err error
	agent, err = lifecycle.NewAgent[processruntime.PodStatus](e.rt, lifecycle.AgentOptions[processruntime.PodStatus]{
		Workers:  podworker.Options[processruntime.PodStatus]{Status: e.rt, BackOff: 200 * time.Millisecond},
		SyncLoop: lifecycle.SyncLoopOptions{Sources: []string{mirror.ApiserverSource}, HousekeepingInterval: 200 * time.Millisecond},
		Recorder: e.rec,
		Features: &lifecycle.PodFeatureOptions{
			Exec:       e.rt,
			Objects:    e.objects,
			Tokens:     fakeTokens{},
			VolumeRoot: e.rt.VolumeRoot(),
			Volumes:    volume.Options{MapIDs: e.rt.MapIDs, RefreshInterval: 500 * time.Millisecond},
		},
	})
	require.NoError(t, err)
	mu.Lock()
	e.agent = agent
	mu.Unlock()
	e.rt.UsePodFeatures(agent.Features())
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	t.Cleanup(func() {
		// Remove every pod, and wait until the runtime has none, before
		// the agent stops.
		require.NoError(t, agent.Config().SetPods(ctx, mirror.ApiserverSource, nil))
		eventually(t, 60*time.Second, "every pod was removed", func() bool { return len(e.rt.RuntimePods()) == 0 })
		eventually(t, 30*time.Second, "every pod's volumes were torn down", func() bool {
			left, err := os.ReadDir(e.rt.VolumeRoot())
			return err == nil && len(left) == 0
		})
		cancel()
		require.NoError(t, <-done)
	})
	return e
}

// run makes pods the API server's pods of the node.
func (e *featureEnv) run(pods ...*v1.Pod) {
	e.t.Helper()
	for _, pod := range pods {
		pod.Spec.NodeName = "node"
		if pod.Spec.TerminationGracePeriodSeconds == nil {
			pod.Spec.TerminationGracePeriodSeconds = new(int64(2))
		}
	}
	require.NoError(e.t, e.agent.Config().SetPods(e.ctx, mirror.ApiserverSource, pods))
}

// api is the pod's status as the API server would be told it.
func (e *featureEnv) api(pod *v1.Pod) v1.PodStatus {
	e.t.Helper()
	return processruntime.APIStatus(pod, status(e.t, e.rt, pod.UID))
}

// container returns the API status of pod's container name.
func (e *featureEnv) container(pod *v1.Pod, name string) v1.ContainerStatus {
	e.t.Helper()
	for _, cs := range e.api(pod).ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	e.t.Fatalf("no status of container %s", name)
	return v1.ContainerStatus{}
}

// waitRunning waits until pod's container name runs, and returns its run.
func (e *featureEnv) waitRunning(pod *v1.Pod, name string) processruntime.ContainerStatus {
	e.t.Helper()
	var c processruntime.ContainerStatus
	eventually(e.t, 30*time.Second, "container "+name+" runs", func() bool {
		var ok bool
		c, ok = status(e.t, e.rt, pod.UID).Container(name)
		return ok && c.State == processruntime.ContainerStateRunning
	})
	return c
}

// exec runs cmd in pod's container name and returns its output, failing
// the test when it cannot run or exits non-zero.
func (e *featureEnv) exec(pod *v1.Pod, name string, cmd ...string) string {
	e.t.Helper()
	var out bytes.Buffer
	code, err := e.rt.Exec(e.ctx, pod.UID, name, cmd, processruntime.Streams{Stdout: &out, Stderr: &out})
	require.NoError(e.t, err)
	require.Zero(e.t, code, "%v: %s", cmd, out.String())
	return out.String()
}

// execCode runs cmd and returns its exit code.
func (e *featureEnv) execCode(pod *v1.Pod, name string, cmd ...string) int {
	e.t.Helper()
	code, err := e.rt.Exec(e.ctx, pod.UID, name, cmd, processruntime.Streams{})
	require.NoError(e.t, err)
	return code
}

// waitEvent waits for an event of pod (or its containers) with reason
// whose message holds msg, and returns its message.
func (e *featureEnv) waitEvent(pod *v1.Pod, reason, msg string) string {
	e.t.Helper()
	var got string
	eventually(e.t, 30*time.Second, fmt.Sprintf("a %s event %q", reason, msg), func() bool {
		for _, ev := range e.rec.of(pod) {
			if ev.reason == reason && strings.Contains(ev.message, msg) {
				got = ev.message
				return true
			}
		}
		return false
	})
	return got
}

// featurePod is a pod of sh -c containers (name, script) with the
// default ServiceAccount and a label, as the API server would make it.
func featurePod(containers ...string) *v1.Pod {
	pod := newPod(v1.RestartPolicyAlways, containers...)
	pod.Labels = map[string]string{"app": "features"}
	pod.Spec.ServiceAccountName = "default"
	return pod
}

// recordedEvent is one event of the recorder.
type recordedEvent struct {
	pod, fieldPath, reason, message string
}

// recorded is the agent's Recorder and the runtime's event log, as the
// kubelet's events would show them.
type recorded struct {
	mu   sync.Mutex
	list []recordedEvent
}

func (r *recorded) Eventf(obj runtime.Object, _, reason, format string, args ...any) {
	ev := recordedEvent{reason: reason, message: fmt.Sprintf(format, args...)}
	switch o := obj.(type) {
	case *v1.Pod:
		ev.pod = string(o.UID)
	case *v1.ObjectReference:
		ev.pod, ev.fieldPath = string(o.UID), o.FieldPath
	}
	r.mu.Lock()
	r.list = append(r.list, ev)
	r.mu.Unlock()
}

// runtime records the runtime's events as the agents do: Killing with its
// message, Failed for a container that cannot be created.
func (r *recorded) runtime(ev processruntime.Event) {
	var rec recordedEvent
	switch ev.Type {
	case processruntime.ContainerKilling:
		rec = recordedEvent{reason: "Killing", message: ev.Message}
	case processruntime.ContainerFailed:
		rec = recordedEvent{reason: "Failed", message: "Error: " + ev.Message}
	case processruntime.PodWarning:
		rec = recordedEvent{reason: ev.Reason, message: ev.Message}
	default:
		return
	}
	rec.pod, rec.fieldPath = string(ev.UID), ev.Container
	r.mu.Lock()
	r.list = append(r.list, rec)
	r.mu.Unlock()
}

func (r *recorded) of(pod *v1.Pod) []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedEvent
	for _, ev := range r.list {
		if ev.pod == string(pod.UID) {
			out = append(out, ev)
		}
	}
	return out
}

// fakeObjects is a settable getter of secrets and config maps.
type fakeObjects struct {
	mu         sync.Mutex
	secrets    map[string]*v1.Secret
	configMaps map[string]*v1.ConfigMap
}

func newFakeObjects() *fakeObjects {
	return &fakeObjects{secrets: map[string]*v1.Secret{}, configMaps: map[string]*v1.ConfigMap{}}
}

func (f *fakeObjects) setConfigMap(namespace, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps[namespace+"/"+name] = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

func (f *fakeObjects) setSecret(namespace, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	f.secrets[namespace+"/"+name] = s
}

func (f *fakeObjects) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[namespace+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f *fakeObjects) GetConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.configMaps[namespace+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

// fakeTokens grants every request a token naming the pod it is bound to.
type fakeTokens struct{}

func (fakeTokens) RequestToken(_ context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	out := req.DeepCopy()
	pod := ""
	if ref := req.Spec.BoundObjectRef; ref != nil {
		pod = ref.Name
	}
	out.Status.Token = "token-of-" + namespace + "-" + sa + "-for-" + pod
	out.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
	return out, nil
}

// reasons returns the reasons of pod's events, in order.
func (e *featureEnv) reasons(pod *v1.Pod) []string {
	var out []string
	for _, ev := range e.rec.of(pod) {
		out = append(out, ev.reason)
	}
	return out
}

// has reports whether list holds s.
func has(list []string, s string) bool { return slices.Contains(list, s) }

var _ = types.UID("")
