package cri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/examples/internal/containerdtest"
	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/lifecycle/volume"
	"github.com/podkit/podkit/podworker"
)

// window is the pod workers as the primitives see them. The primitives are
// made before the workers (the syncer takes them, and the workers take the
// syncer), so the workers are set once made, before anything runs.
type window struct {
	w *podworker.PodWorkers[*cri.PodStatus]
}

func (w *window) CouldHaveRunningContainers(uid types.UID) bool {
	return w.w.CouldHaveRunningContainers(uid)
}
func (w *window) IsPodTerminationRequested(uid types.UID) bool {
	return w.w.IsPodTerminationRequested(uid)
}
func (w *window) ShouldPodContentBeRemoved(uid types.UID) bool {
	return w.w.ShouldPodContentBeRemoved(uid)
}
func (w *window) requestSync(uid types.UID) { w.w.Resync(uid) }

// objects is a getter of config maps, changed by the tests.
type objects struct {
	mu         sync.Mutex
	configMaps map[string]map[string]string
	secrets    map[string]map[string]string
}

func (o *objects) set(name string, data map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.configMaps[name] = data
}

func (o *objects) getters() podenv.ObjectsFuncs {
	return podenv.ObjectsFuncs{
		ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			data, ok := o.configMaps[name]
			if !ok {
				return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
			}
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{}}
			for k, v := range data {
				cm.Data[k] = v
			}
			return cm, nil
		},
		Secret: func(_ context.Context, ns, name string) (*v1.Secret, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			data, ok := o.secrets[name]
			if !ok {
				return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
			}
			sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
			for k, v := range data {
				sec.Data[k] = []byte(v)
			}
			return sec, nil
		},
	}
}

// recorded is every event, as "pod reason message".
type recorded struct {
	mu   sync.Mutex
	list []string
}

func (r *recorded) recorder() event.Recorder {
	return event.RecorderFunc(func(obj runtime.Object, _, reason, format string, args ...any) {
		name := "?"
		switch o := obj.(type) {
		case *v1.Pod:
			name = o.Name
		case *v1.ObjectReference:
			name = o.Name
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.list = append(r.list, name+" "+reason+" "+fmt.Sprintf(format, args...))
	})
}

// has reports whether pod has an event with reason whose message holds
// text.
func (r *recorded) has(pod, reason, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.list {
		if strings.HasPrefix(e, pod+" "+reason+" ") && strings.Contains(e, text) {
			return true
		}
	}
	return false
}

// primitivesEnv is a Syncer over a real containerd with every primitive of
// lifecycle/, driven by a real engine.
type primitivesEnv struct {
	cd      *containerdtest.Containerd
	syncer  *cri.Syncer
	w       *podworker.PodWorkers[*cri.PodStatus]
	objects *objects
	events  *recorded

	mu    sync.Mutex
	final map[types.UID]v1.PodStatus // the last API status reported
}

// TestContainerdPrimitives runs the documented examples of podkit's per-pod
// primitives through the CRI syncer and containerd: both runtimes use the
// same primitives, so they agree.
func TestContainerdPrimitives(t *testing.T) {
	cd := containerdtest.Start(t)
	require.NoError(t, cd.ReachPods(), "the probes connect to the pods")
	e := &primitivesEnv{cd: cd, objects: &objects{configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{"db": {"password": "s3cret"}}}, events: &recorded{}, final: map[types.UID]v1.PodStatus{}}
	win := &window{}
	rec := e.events.recorder()
	exec := cri.NewExecRunner(cd.Client)

	env, err := podenv.New(e.objects.getters(), podenv.Options{Recorder: rec})
	require.NoError(t, err)
	vols, err := volume.New(t.TempDir(), e.objects.getters(), win, volume.Options{Recorder: rec, RequestSync: win.requestSync, RefreshInterval: time.Second})
	require.NoError(t, err)
	probes, err := probe.New(win, probe.Options{Exec: exec, RequestSync: win.requestSync, Recorder: rec})
	require.NoError(t, err)
	deadlines, err := deadline.New(win, deadline.Options{RequestSync: win.requestSync, Recorder: rec})
	require.NoError(t, err)
	hooks := containerhook.New(containerhook.Options{Exec: exec, Recorder: rec})

	e.syncer, err = cri.New(cd.Client, cd.Client, cri.Options{
		Images:            cd.Client,
		NodeIPs:           nodeIPs(),
		RuntimeName:       "containerd",
		RestartBackOff:    200 * time.Millisecond,
		MaxRestartBackOff: time.Second,
		Env:               env,
		Volumes:           vols,
		Probes:            probes,
		Hooks:             hooks,
		Deadline:          deadlines,
		Recorder:          rec,
		OnStatus: func(pod *v1.Pod, s v1.PodStatus) {
			e.mu.Lock()
			e.final[pod.UID] = s
			e.mu.Unlock()
		},
	})
	require.NoError(t, err)
	e.w, err = podworker.New[*cri.PodStatus](e.syncer, podworker.Options[*cri.PodStatus]{
		Status:         e.syncer,
		ResyncInterval: 300 * time.Millisecond,
		BackOff:        100 * time.Millisecond,
		MaxBackOff:     time.Second,
	})
	require.NoError(t, err)
	win.w = e.w

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{e.w.Run, vols.Run, probes.Run, deadlines.Run} {
		wg.Go(func() { assert.NoError(t, run(ctx)) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		hooks.Wait()
	})

	t.Run("EnvFromGetter", e.envFromGetter)
	t.Run("Volumes", e.volumes)
	t.Run("ExecLivenessRestarts", e.execLiveness)
	t.Run("HTTPLivenessRestarts", e.httpLiveness)
	t.Run("ReadinessFalseOnClosedPort", e.readiness)
	t.Run("StartupProbeGatesReadiness", e.startup)
	t.Run("PostStartAndPreStop", e.hooks)
	t.Run("FailedPostStartKills", e.failedPostStart)
	t.Run("ActiveDeadline", e.deadline)
}

// envFromGetter: a container whose configMapKeyRef is missing waits in
// CreateContainerConfigError (the pod stays Pending); once the key exists
// it starts with the value, status.podIP and the expanded command.
func (e *primitivesEnv) envFromGetter(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("env", "echo $(GREETING) from $(POD_IP) > /tmp/said; sleep 1000")
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "env-settings"}, Key: "greeting"}}},
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	e.create(t, ctx, pod)
	api := e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == cri.ReasonCreateContainerConfigError
	})
	assert.Contains(t, api.ContainerStatuses[0].State.Waiting.Message, `configmaps "env-settings" not found`)
	assert.Equal(t, v1.PodPending, api.Phase, "the pod does not fail")
	assert.True(t, e.events.has(pod.Name, cri.EventFailed, "Error: "), "a Failed event")

	e.objects.set("env-settings", map[string]string{"greeting": "hello"})
	api = e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	id := api.ContainerStatuses[0].ContainerID
	envOut := e.exec(t, ctx, id, "env")
	assert.Contains(t, envOut, "GREETING=hello\n")
	assert.Contains(t, envOut, "POD_NAME=env\n")
	assert.Contains(t, envOut, "POD_IP="+api.PodIP+"\n")
	e.poll(t, ctx, func() bool { return e.tryExec(ctx, id, "cat", "/tmp/said") == "hello from "+api.PodIP+"\n" })
	e.delete(t, ctx, pod)
}

// volumes: a configMap volume's keys are files in the container, read-only,
// and follow the config map; an emptyDir is shared by the pod's containers;
// a secret volume (on a tmpfs the volume manager mounted) and a
// downwardAPI volume are there too.
func (e *primitivesEnv) volumes(t *testing.T) {
	ctx := testContext(t)
	e.objects.set("web-config", map[string]string{"index.html": "v1"})
	pod := realPod("volumes", "echo from-writer > /shared/note; trap 'exit 0' TERM; sleep 1000 & wait")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "web-config"}}}},
		{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "db", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "db"}}},
		{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		}}}},
	}
	pod.Labels = map[string]string{"tier": "web"}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "config", MountPath: "/etc/web"}, {Name: "shared", MountPath: "/shared"},
		{Name: "db", MountPath: "/etc/db"}, {Name: "podinfo", MountPath: "/etc/podinfo"},
	}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
		Name: "reader", Image: busybox, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"},
		VolumeMounts: []v1.VolumeMount{{Name: "shared", MountPath: "/from-writer", ReadOnly: true}, {Name: "config", MountPath: "/page.html", SubPath: "index.html"}},
	})
	e.create(t, ctx, pod)
	api := e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool {
		return s.ContainerStatuses[0].State.Running != nil && s.ContainerStatuses[1].State.Running != nil
	})
	writer, reader := api.ContainerStatuses[0].ContainerID, api.ContainerStatuses[1].ContainerID
	assert.Equal(t, "v1", e.exec(t, ctx, writer, "cat", "/etc/web/index.html"))
	assert.Equal(t, "s3cret", e.exec(t, ctx, writer, "cat", "/etc/db/password"))
	assert.Equal(t, `tier="web"`, e.exec(t, ctx, writer, "cat", "/etc/podinfo/labels"))
	assert.Equal(t, "v1", e.exec(t, ctx, reader, "cat", "/page.html"), "a subPath of the volume")
	e.poll(t, ctx, func() bool { return e.tryExec(ctx, reader, "cat", "/from-writer/note") == "from-writer\n" })
	_, code := e.execCode(t, ctx, writer, "sh", "-c", "echo x > /etc/web/new")
	assert.NotZero(t, code, "a configMap volume is read-only")
	_, code = e.execCode(t, ctx, reader, "sh", "-c", "echo x > /from-writer/other")
	assert.NotZero(t, code, "readOnly: true")

	e.objects.set("web-config", map[string]string{"index.html": "v2"})
	e.poll(t, ctx, func() bool { return e.tryExec(ctx, writer, "cat", "/etc/web/index.html") == "v2" })
	e.delete(t, ctx, pod)
}

// execLiveness: a container whose exec liveness probe starts failing is
// killed and restarted, with Unhealthy and Killing events.
func (e *primitivesEnv) execLiveness(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("liveness", "touch /tmp/healthy; sleep 2; rm /tmp/healthy; trap 'exit 0' TERM; sleep 1000 & wait")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 5,
	}
	e.create(t, ctx, pod)
	api := e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount >= 1 && s.ContainerStatuses[0].State.Running != nil
	})
	require.NotNil(t, api.ContainerStatuses[0].LastTerminationState.Terminated, "the killed run")
	assert.True(t, e.events.has(pod.Name, probe.ReasonUnhealthy, "Liveness probe failed"))
	assert.True(t, e.events.has(pod.Name, cri.EventKilling, "Container main failed liveness probe, will be restarted"))
	e.delete(t, ctx, pod)
}

// httpLiveness: a container whose httpGet liveness probe starts getting
// 404 from it is killed and restarted.
func (e *primitivesEnv) httpLiveness(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("http-liveness", "busybox mkdir -p /www; echo ok > /www/healthz; (sleep 2; rm /www/healthz) & exec busybox httpd -f -p 8082 -h /www")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8082)}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	one := int64(1) // httpd, as PID 1, ignores SIGTERM: the kill takes the grace period
	pod.Spec.TerminationGracePeriodSeconds = &one
	e.create(t, ctx, pod)
	e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount >= 1 && s.ContainerStatuses[0].State.Running != nil
	})
	assert.True(t, e.events.has(pod.Name, probe.ReasonUnhealthy, "Liveness probe failed: HTTP probe failed with statuscode: 404"))
	assert.True(t, e.events.has(pod.Name, cri.EventKilling, "Container main failed liveness probe, will be restarted"))
	e.delete(t, ctx, pod)
}

// readiness: a container whose tcpSocket readiness probe finds a closed
// port is not ready, nor is the pod; one whose httpGet probe is answered
// is.
func (e *primitivesEnv) readiness(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("readiness", "trap 'exit 0' TERM; sleep 1000 & wait")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
		Name: "web", Image: busybox, Command: []string{"sh", "-c", "busybox mkdir -p /www && echo ok > /www/index.html && exec busybox httpd -f -p 8081 -h /www"},
		ReadinessProbe: &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/index.html", Port: intstr.FromInt32(8081)}},
			PeriodSeconds: 1,
		},
	})
	e.create(t, ctx, pod)
	api := e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool {
		return s.ContainerStatuses[0].State.Running != nil && s.ContainerStatuses[1].Ready
	})
	assert.False(t, api.ContainerStatuses[0].Ready, "port 8080 is closed")
	assert.Equal(t, v1.ConditionFalse, condition(api, v1.PodReady))
	assert.Equal(t, v1.ConditionFalse, condition(api, v1.ContainersReady))
	assert.True(t, e.events.has(pod.Name, probe.ReasonUnhealthy, "Readiness probe failed"))
	e.delete(t, ctx, pod)
}

// startup: until its startup probe passes, a running container is neither
// started nor ready, and its readiness probe waits; then both are.
func (e *primitivesEnv) startup(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("startup", "sleep 2; touch /tmp/started; trap 'exit 0' TERM; sleep 1000 & wait")
	c := &pod.Spec.Containers[0]
	c.StartupProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/started"}}},
		PeriodSeconds: 1, FailureThreshold: 30, TimeoutSeconds: 5,
	}
	c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1, TimeoutSeconds: 5}
	e.create(t, ctx, pod)
	api := e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	cs := api.ContainerStatuses[0]
	require.NotNil(t, cs.Started)
	assert.False(t, *cs.Started, "not started before its startup probe passed")
	assert.False(t, cs.Ready)
	api = e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool { return s.ContainerStatuses[0].Ready })
	assert.True(t, *api.ContainerStatuses[0].Started)
	assert.Equal(t, v1.ConditionTrue, condition(api, v1.PodReady))
	assert.Zero(t, api.ContainerStatuses[0].RestartCount)
	e.delete(t, ctx, pod)
}

// hooks: a postStart hook runs in the container before it is reported
// running, and a preStop hook runs before it is stopped, within the grace
// period; both write to a hostPath volume the test reads.
func (e *primitivesEnv) hooks(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	pod := realPod("hooks", "trap 'echo term >> /hostdir/log; exit 0' TERM; sleep 1000 & wait")
	dirType := v1.HostPathDirectory
	pod.Spec.Volumes = []v1.Volume{{Name: "hostdir", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "hostdir", MountPath: "/hostdir"}}
	c.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo postStart >> /hostdir/log"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo preStop >> /hostdir/log"}}},
	}
	e.create(t, ctx, pod)
	e.waitStatus(t, ctx, pod, func(s v1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	e.delete(t, ctx, pod)
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	require.NoError(t, err)
	assert.Equal(t, "postStart\npreStop\nterm\n", string(log), "postStart, then preStop before the stop's SIGTERM")
}

// failedPostStart: a postStart hook that fails kills its container
// (FailedPostStartHook), which its restart policy starts again.
func (e *primitivesEnv) failedPostStart(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("bad-poststart", "trap 'exit 0' TERM; sleep 1000 & wait")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 3"}}},
	}
	e.create(t, ctx, pod)
	e.poll(t, ctx, func() bool {
		st, err := e.syncer.PodStatus(ctx, pod.UID, time.Time{})
		require.NoError(t, err)
		return st.APIStatus(pod).ContainerStatuses[0].RestartCount >= 1
	})
	assert.True(t, e.events.has(pod.Name, containerhook.ReasonFailedPostStartHook, "PostStartHook failed"))
	assert.True(t, e.events.has(pod.Name, cri.EventKilling, "FailedPostStartHook"))
	e.delete(t, ctx, pod)
}

// deadline: a pod past its activeDeadlineSeconds is stopped and ends
// Failed with reason DeadlineExceeded.
func (e *primitivesEnv) deadline(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("deadline", "trap 'exit 0' TERM; sleep 1000 & wait")
	two := int64(2)
	pod.Spec.ActiveDeadlineSeconds = &two
	start := time.Now()
	e.create(t, ctx, pod)
	_, err := e.w.WaitForStage(ctx, pod.UID, podworker.StageTerminated)
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("TIMING activeDeadlineSeconds 2: create -> terminated %v", took.Round(time.Millisecond))
	assert.GreaterOrEqual(t, took, 2*time.Second)
	e.mu.Lock()
	final := e.final[pod.UID]
	e.mu.Unlock()
	assert.Equal(t, v1.PodFailed, final.Phase)
	assert.Equal(t, deadline.Reason, final.Reason)
	assert.Equal(t, deadline.Message, final.Message)
	assert.True(t, e.events.has(pod.Name, deadline.Reason, deadline.Message))
	e.delete(t, ctx, pod)
}

func (e *primitivesEnv) create(t *testing.T, ctx context.Context, pod *v1.Pod) {
	t.Helper()
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
}

// delete deletes pod with its grace period and waits until its worker
// finished and nothing of it is left in containerd.
func (e *primitivesEnv) delete(t *testing.T, ctx context.Context, pod *v1.Pod) {
	t.Helper()
	deleted := pod.DeepCopy()
	now := metav1.Now()
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, pod.Spec.TerminationGracePeriodSeconds
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: deleted}))
	_, _, err := e.w.WaitFor(ctx, pod.UID, func(i podworker.PodInfo, ok bool) bool { return ok && i.Finished })
	require.NoError(t, err)
	st, err := e.syncer.PodStatus(ctx, pod.UID, time.Time{})
	require.NoError(t, err)
	assert.Empty(t, st.Sandboxes)
	assert.Empty(t, st.Containers)
}

// waitStatus polls the pod's API status, as the syncer and the probes make
// it, until cond holds, and returns it.
func (e *primitivesEnv) waitStatus(t *testing.T, ctx context.Context, pod *v1.Pod, cond func(v1.PodStatus) bool) v1.PodStatus {
	t.Helper()
	var last v1.PodStatus
	defer func() {
		if t.Failed() {
			e.events.mu.Lock()
			t.Logf("last status of %s: %+v\nevents: %q", pod.Name, last, e.events.list)
			e.events.mu.Unlock()
		}
	}()
	e.poll(t, ctx, func() bool {
		e.mu.Lock()
		last = e.final[pod.UID]
		e.mu.Unlock()
		return len(last.ContainerStatuses) == len(pod.Spec.Containers) && cond(last)
	})
	return last
}

func (e *primitivesEnv) poll(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	poll(t, ctx, cond)
}

// exec runs cmd in the container (an API ContainerID) and returns its
// output; it must exit 0.
func (e *primitivesEnv) exec(t *testing.T, ctx context.Context, id string, cmd ...string) string {
	t.Helper()
	out, code := e.execCode(t, ctx, id, cmd...)
	require.Zero(t, code, "%q: %s", cmd, out)
	return out
}

func (e *primitivesEnv) execCode(t *testing.T, ctx context.Context, id string, cmd ...string) (string, int) {
	t.Helper()
	out, code, err := e.syncer.ExecInContainer(ctx, id, cmd, 10*time.Second)
	require.NoError(t, err)
	return string(out), code
}

// tryExec is exec whose failure is an empty output.
func (e *primitivesEnv) tryExec(ctx context.Context, id string, cmd ...string) string {
	out, code, err := e.syncer.ExecInContainer(ctx, id, cmd, 10*time.Second)
	if err != nil || code != 0 {
		return ""
	}
	return string(out)
}

func condition(s v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
