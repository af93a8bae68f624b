package cri_test

import (
	"context"
	"errors"
	"fmt"
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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
)

// events records what a Recorder is given, as "type reason message".
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) recorder() event.Recorder {
	return event.RecorderFunc(func(_ runtime.Object, eventType, reason, format string, args ...any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.list = append(e.list, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
	})
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// A pod that needs a primitive the syncer was not given never runs
// without it: nothing is created, its containers wait with the kubelet's
// reason, and an event says why.
func TestSyncPodWaitsForAMissingPrimitive(t *testing.T) {
	for name, mutate := range map[string]func(*v1.Pod){
		"probe": func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		},
		"deadline": func(p *v1.Pod) { d := int64(5); p.Spec.ActiveDeadlineSeconds = &d },
		"volume": func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			e := newEnv(t, func(o *cri.Options) { o.Recorder = ev.recorder() })
			pod := newPod("needs-"+name, mutate)
			require.ErrorIs(t, e.syncer.Unsupported(pod), cri.ErrUnsupported)
			_, err := e.sync(t, pod)
			require.ErrorIs(t, err, cri.ErrUnsupported)
			sandboxes, containers := e.counts()
			assert.Zero(t, sandboxes+containers, "nothing of the pod runs")

			_, err = e.sync(t, pod) // the next sync reports the reason
			require.Error(t, err)
			w := e.lastStatus(t, pod.UID).ContainerStatuses[0].State.Waiting
			require.NotNil(t, w)
			assert.Equal(t, cri.ReasonCreateContainerConfigError, w.Reason)
			assert.Contains(t, w.Message, "Options.")
			require.NotEmpty(t, ev.all())
			assert.Contains(t, ev.all()[0], "Warning Failed Error: cri: unsupported pod feature")
		})
	}
}

// The environment is podenv's, over the getter: a missing required key is
// a container waiting in CreateContainerConfigError (the pod does not
// fail), retried at the next sync, which creates it once the key exists;
// command and args see the variables.
func TestSyncPodEnvFromGetter(t *testing.T) {
	var mu sync.Mutex
	data := map[string]string{}
	getter := podenv.ObjectsFuncs{ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
		mu.Lock()
		defer mu.Unlock()
		if name != "settings" || len(data) == 0 {
			return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
		}
		cm := &v1.ConfigMap{Data: map[string]string{}}
		for k, v := range data {
			cm.Data[k] = v
		}
		return cm, nil
	}}
	var ev events
	builder, err := podenv.New(getter, podenv.Options{})
	require.NoError(t, err)
	e := newEnv(t, func(o *cri.Options) { o.Env = builder; o.Recorder = ev.recorder() })
	pod := newPod("env", func(p *v1.Pod) {
		c := &p.Spec.Containers[0]
		c.Command = []string{"sh", "-c", "echo $(GREETING) $(POD_IP)"}
		c.Env = []v1.EnvVar{
			{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "greeting"}}},
			{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		}
	})

	_, err = e.sync(t, pod)
	require.True(t, podenv.IsConfigError(err), "got %v", err)
	_, containers := e.counts()
	assert.Zero(t, containers, "not created without its environment")
	_, err = e.sync(t, pod)
	require.Error(t, err)
	api := e.lastStatus(t, pod.UID)
	assert.Equal(t, v1.PodPending, api.Phase, "the pod does not fail")
	w := api.ContainerStatuses[0].State.Waiting
	require.NotNil(t, w)
	assert.Equal(t, "CreateContainerConfigError", w.Reason)
	assert.Contains(t, w.Message, `configmaps "settings" not found`)
	assert.Contains(t, ev.all(), `Warning Failed Error: `+w.Message)

	mu.Lock()
	data["greeting"] = "hello"
	mu.Unlock()
	e.mustSync(t, pod)
	config := e.rt.lastConfig(t, "app")
	envs := map[string]string{}
	for _, kv := range config.GetEnvs() {
		envs[kv.GetKey()] = string(kv.GetValue())
	}
	assert.Equal(t, "hello", envs["GREETING"])
	require.NotEmpty(t, envs["POD_IP"], "the new sandbox's address")
	assert.Equal(t, []string{"sh", "-c", "echo hello " + envs["POD_IP"]}, config.GetCommand())
	e.mustSync(t, pod)
	api = e.lastStatus(t, pod.UID)
	assert.NotNil(t, api.ContainerStatuses[0].State.Running, "the waiting reason is gone once created")
}

// fakeVolumes is a VolumeManager that prepared every volume under /vol.
type fakeVolumes struct {
	mu     sync.Mutex
	setUps int
	ready  bool
}

func (f *fakeVolumes) SetUp(context.Context, *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setUps++
	if !f.ready {
		return fmt.Errorf("volume: not ready yet")
	}
	return nil
}

func (f *fakeVolumes) HostPath(uid types.UID, name string) (string, error) {
	return "/vol/" + string(uid) + "/" + name, nil
}

func (f *fakeVolumes) SubPath(uid types.UID, name, sub string) (string, error) {
	return "/vol/" + string(uid) + "/" + name + "/" + sub, nil
}

func (f *fakeVolumes) TearDown(types.UID) (bool, error) { return true, nil }

// Volume mounts become CRI Mounts of the volume manager's directories, once
// SetUp succeeded: API data volumes read-only, subPath and subPathExpr
// resolved, the same directory for every container that mounts an
// emptyDir.
func TestSyncPodMounts(t *testing.T) {
	vols := &fakeVolumes{}
	e := newEnv(t, func(o *cri.Options) { o.Volumes = vols })
	pod := newPod("mounts", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{
			{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
			{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "SUB", Value: "logs"}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
			{Name: "config", MountPath: "/etc/app"},
			{Name: "shared", MountPath: "/data", SubPathExpr: "$(SUB)"},
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: testImage,
			VolumeMounts: []v1.VolumeMount{{Name: "shared", MountPath: "/shared", ReadOnly: true}, {Name: "config", MountPath: "/c", SubPath: "key"}}})
	})
	_, err := e.sync(t, pod)
	require.ErrorContains(t, err, "not ready yet")
	_, containers := e.counts()
	assert.Zero(t, containers, "no container starts before its volumes are ready")

	vols.mu.Lock()
	vols.ready = true
	vols.mu.Unlock()
	e.mustSync(t, pod)
	root := "/vol/" + string(pod.UID)
	assert.Equal(t, []*runtimeapi.Mount{
		{ContainerPath: "/etc/app", HostPath: root + "/config", Readonly: true},
		{ContainerPath: "/data", HostPath: root + "/shared/logs"},
	}, e.rt.lastConfig(t, "app").GetMounts())
	assert.Equal(t, []*runtimeapi.Mount{
		{ContainerPath: "/shared", HostPath: root + "/shared", Readonly: true},
		{ContainerPath: "/c", HostPath: root + "/config/key", Readonly: true},
	}, e.rt.lastConfig(t, "side").GetMounts())

	// A mount of a volume the pod does not have waits, saying so.
	bad := newPod("bad-mount", func(p *v1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/x"}}
	})
	_, err = e.sync(t, bad)
	require.ErrorContains(t, err, `cannot find volume "nope"`)
	_, err = e.sync(t, bad)
	require.Error(t, err)
	w := e.lastStatus(t, bad.UID).ContainerStatuses[0].State.Waiting
	require.NotNil(t, w)
	assert.Equal(t, cri.ReasonCreateContainerConfigError, w.Reason)
}

// fakeProber says that container "app" failed its liveness probe, in
// every run, and marks every running container ready.
type fakeProber struct {
	mu      sync.Mutex
	updates int
	removed []types.UID
}

func (f *fakeProber) UpdatePodStatus(_ *v1.Pod, st *v1.PodStatus) error {
	f.mu.Lock()
	f.updates++
	f.mu.Unlock()
	for i := range st.ContainerStatuses {
		st.ContainerStatuses[i].Ready = false // the probe says so
	}
	return nil
}

func (f *fakeProber) ShouldRestart(_ *v1.Pod, name, id string) (probe.Restart, bool) {
	if name != "app" || id == "" {
		return probe.Restart{}, false
	}
	return probe.Restart{Probe: probe.Liveness, Message: "Container app failed liveness probe", GracePeriodSeconds: 7}, true
}

func (f *fakeProber) RemovePod(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, uid)
}

// A container the prober says to restart is killed with the probe's grace
// (a Killing event) and started again by its policy; the statuses go
// through UpdatePodStatus, and the pod is forgotten with it.
func TestSyncPodKillsWhatTheProberSays(t *testing.T) {
	var ev events
	prober := &fakeProber{}
	e := newEnv(t, func(o *cri.Options) { o.Probes = prober; o.Recorder = ev.recorder() })
	pod := newPod("unhealthy", func(p *v1.Pod) {
		p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	})
	e.mustSync(t, pod)
	first := e.container(t, pod.UID, "app").GetId()
	e.mustSync(t, pod)
	stops := e.rt.stopCalls()
	require.Len(t, stops, 1)
	assert.Equal(t, stopCall{first, 7}, stops[0], "killed with the probe's grace")
	assert.Contains(t, ev.all(), "Normal Killing Container app failed liveness probe, will be restarted")
	now := e.container(t, pod.UID, "app")
	assert.NotEqual(t, first, now.GetId(), "started again (restartPolicy Always)")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, now.GetState())
	assert.False(t, e.lastStatus(t, pod.UID).ContainerStatuses[0].Ready, "readiness is the prober's")

	require.NoError(t, e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 1, nil))
	require.NoError(t, e.syncer.SyncTerminatedPod(context.Background(), pod, nil))
	assert.Equal(t, []types.UID{pod.UID}, prober.removed)
}

// fakeHooks fails every postStart hook and records preStop calls.
type fakeHooks struct {
	mu       sync.Mutex
	preStops []string
}

func (f *fakeHooks) PostStart(context.Context, containerhook.Container) error {
	return &containerhook.HookError{Reason: containerhook.ErrPostStartHook.Error(), Message: "exec failed: secret output"}
}

func (f *fakeHooks) PreStop(_ context.Context, c containerhook.Container, grace int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preStops = append(f.preStops, fmt.Sprintf("%s %s %d", c.Name, c.ID, grace))
	return 0, nil
}

// A failed postStart hook kills the container (its preStop hook first),
// with a Killing event that holds no output, and the container waits with
// the hook's reason and message until its restart.
func TestSyncPodPostStartFailureKills(t *testing.T) {
	var ev events
	hooks := &fakeHooks{}
	e := newEnv(t, func(o *cri.Options) { o.Hooks = hooks; o.Recorder = ev.recorder() })
	grace := int64(3)
	pod := newPod("hooked", func(p *v1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = &grace
		p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
			PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}},
			PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		}
	})
	_, err := e.sync(t, pod)
	require.ErrorContains(t, err, "postStart hook")
	assert.NotContains(t, err.Error(), "secret output", "a hook's output stays out of errors")
	id := e.container(t, pod.UID, "app").GetId()
	assert.Equal(t, []string{"app fake://" + id + " 3"}, hooks.preStops)
	assert.Equal(t, []stopCall{{id, 2}}, e.rt.stopCalls(), "what preStop left, at least 2 s")
	assert.Contains(t, ev.all(), "Normal Killing FailedPostStartHook")

	e.exit(t, pod.UID, "app", 137, time.Second) // what the stop did
	_, err = e.sync(t, pod)
	require.ErrorContains(t, err, "postStart hook", "restarted at once, and failed again")
	e.exit(t, pod.UID, "app", 137, time.Second)
	_, err = e.sync(t, pod)
	require.ErrorIs(t, err, cri.ErrBackOff)
	cs := e.lastStatus(t, pod.UID).ContainerStatuses[0]
	require.NotNil(t, cs.State.Waiting, "%+v", cs.State)
	assert.Equal(t, "PostStartHookError", cs.State.Waiting.Reason)
	assert.Equal(t, "exec failed: secret output", cs.State.Waiting.Message, "the output is in the status")
	assert.Equal(t, int32(1), cs.RestartCount)
	require.NotNil(t, cs.LastTerminationState.Terminated)
	assert.Equal(t, int32(137), cs.LastTerminationState.Terminated.ExitCode)

	// Once the back-off's own reason takes over.
	_, _ = e.sync(t, pod)
	cs = e.lastStatus(t, pod.UID).ContainerStatuses[0]
	require.NotNil(t, cs.State.Waiting)
	assert.Equal(t, cri.ReasonCrashLoopBackOff, cs.State.Waiting.Reason)
}

// execRuntime answers ExecSync as a runtime does: a command that ran and
// failed is an error carrying its exit code.
type execRuntime struct {
	*fakeRuntime
	code int
	err  error
}

func (r *execRuntime) ExecSync(_ context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if r.err != nil {
		return nil, nil, r.err
	}
	if r.code != 0 {
		return []byte("out;"), []byte("err"), utilexec.CodeExitError{Err: errors.New("exited"), Code: r.code}
	}
	return []byte(id + " " + strings.Join(cmd, " ") + " " + timeout.String()), nil, nil
}

// The ExecRunner runs in the CRI container named by an API ContainerID,
// and reads a failed command's exit code from the runtime's error: only a
// call that could not be made is an error.
func TestExecRunner(t *testing.T) {
	rt := &execRuntime{fakeRuntime: &fakeRuntime{FakeRuntimeService: fakeapi.NewFakeRuntimeService()}}
	r := cri.NewExecRunner(rt)
	out, code, err := r.ExecInContainer(context.Background(), "containerd://abc", []string{"cat", "/x"}, 2*time.Second)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "abc cat /x 2s", string(out))

	rt.code = 3
	out, code, err = r.ExecInContainer(context.Background(), "abc", []string{"false"}, 0)
	require.NoError(t, err, "a command that ran and failed")
	assert.Equal(t, 3, code)
	assert.Equal(t, "out;err", string(out), "stdout, then stderr")

	rt.err = errors.New("container gone")
	_, _, err = r.ExecInContainer(context.Background(), "abc", []string{"true"}, 0)
	require.ErrorContains(t, err, "container gone")
}

// fakeDeadline says every pod with activeDeadlineSeconds is past it once
// it has a start time.
type fakeDeadline struct {
	mu        sync.Mutex
	starts    []*metav1.Time
	forgotten []types.UID
}

func (f *fakeDeadline) Check(pod *v1.Pod, start *metav1.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, start)
	return pod.Spec.ActiveDeadlineSeconds != nil && start != nil, nil
}

func (f *fakeDeadline) Forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, uid)
}

// A pod past its deadline is reported Failed with DeadlineExceeded and
// SyncPod returns terminal, starting nothing; the final status keeps the
// reason, and the pod is forgotten with its deadline.
func TestSyncPodPastDeadline(t *testing.T) {
	dl := &fakeDeadline{}
	e := newEnv(t, func(o *cri.Options) { o.Deadline = dl })
	ten := int64(10)
	pod := newPod("deadline", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = &ten })
	terminal, err := e.sync(t, pod)
	require.NoError(t, err)
	assert.True(t, terminal, "the first sync times from now")
	api := e.lastStatus(t, pod.UID)
	assert.Equal(t, v1.PodFailed, api.Phase)
	assert.Equal(t, deadline.Reason, api.Reason)
	sandboxes, containers := e.counts()
	assert.Zero(t, sandboxes+containers, "nothing started")

	var final v1.PodStatus
	require.NoError(t, e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 1, func(s *v1.PodStatus) { final = *s }))
	assert.Equal(t, v1.PodFailed, final.Phase)
	assert.Equal(t, deadline.Message, final.Message)
	require.NoError(t, e.syncer.SyncTerminatedPod(context.Background(), pod, nil))
	assert.Equal(t, []types.UID{pod.UID}, dl.forgotten)

	// A pod with no deadline runs.
	e.mustSync(t, newPod("no-deadline"))
}

// With a prober, a probe that cannot run (a port name the container does
// not have) refuses the pod, as the API server would.
func TestUnsupportedInvalidProbe(t *testing.T) {
	e := newEnv(t, func(o *cri.Options) { o.Probes = &fakeProber{} })
	pod := newPod("bad-probe", func(p *v1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("web")}}}
	})
	err := e.syncer.Unsupported(pod)
	require.ErrorIs(t, err, cri.ErrUnsupported)
	assert.ErrorContains(t, err, `"web"`)
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "web", ContainerPort: 80}}
	assert.NoError(t, e.syncer.Unsupported(pod))
}
