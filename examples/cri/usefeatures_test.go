package cri_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/podworker"
)

// The features an agent's assembly built replace the syncer's own: a pod
// with a probe, a deadline and a volume, refused by a syncer given none,
// is accepted once UsePodFeatures gave the assembly's; its container's
// environment comes from the assembly's Objects; a nil goes back to the
// syncer's own (none), and the pod is refused again.
func TestUsePodFeatures(t *testing.T) {
	e := newEnv(t)
	objects := podenv.ObjectsFuncs{ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
		if ns != "ns" || name != "settings" {
			return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
		}
		return &v1.ConfigMap{Data: map[string]string{"greeting": "hello"}}, nil
	}}
	agent, err := lifecycle.NewAgent(e.syncer, lifecycle.AgentOptions[*cri.PodStatus]{
		Workers: podworker.Options[*cri.PodStatus]{Status: e.syncer},
		Features: &lifecycle.PodFeatureOptions{
			Exec:       cri.NewExecRunner(e.rt),
			Objects:    objects,
			VolumeRoot: t.TempDir(),
		},
	})
	require.NoError(t, err)

	deadline := int64(600)
	full := newPod("full", func(p *v1.Pod) {
		p.Spec.ActiveDeadlineSeconds = &deadline
		p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		c := &p.Spec.Containers[0]
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		c.VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	})
	err = e.syncer.Unsupported(full)
	require.ErrorIs(t, err, cri.ErrUnsupported)
	for _, what := range []string{"probe manager", "deadline manager", "volume manager"} {
		assert.Contains(t, err.Error(), what)
	}

	e.syncer.UsePodFeatures(agent.Features())
	assert.NoError(t, e.syncer.Unsupported(full), "the assembly's probes, deadline and volumes")

	// The environment is the assembly's builder, over its Objects (the
	// default builder has no getter: the container would wait).
	pod := newPod("env", func(p *v1.Pod) {
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "greeting"}}}}
	})
	e.mustSync(t, pod)
	envs := map[string]string{}
	for _, kv := range e.rt.lastConfig(t, "app").GetEnvs() {
		envs[kv.GetKey()] = string(kv.GetValue())
	}
	assert.Equal(t, "hello", envs["GREETING"])

	e.syncer.UsePodFeatures(nil)
	assert.ErrorIs(t, e.syncer.Unsupported(full), cri.ErrUnsupported, "back to the syncer's own: none")
	other := newPod("env-again", func(p *v1.Pod) { p.Spec.Containers[0].Env = pod.Spec.Containers[0].Env })
	_, err = e.sync(t, other)
	assert.True(t, podenv.IsConfigError(err), "the default builder has no getter: got %v", err)
}

// Features built without a VolumeRoot have no volume manager: a pod with
// a volume other than hostPath is refused, while its probes are run.
func TestUsePodFeaturesWithoutVolumes(t *testing.T) {
	e := newEnv(t)
	agent, err := lifecycle.NewAgent(e.syncer, lifecycle.AgentOptions[*cri.PodStatus]{
		Workers:  podworker.Options[*cri.PodStatus]{Status: e.syncer},
		Features: &lifecycle.PodFeatureOptions{Exec: cri.NewExecRunner(e.rt)},
	})
	require.NoError(t, err)
	e.syncer.UsePodFeatures(agent.Features())
	pod := newPod("vol", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	})
	err = e.syncer.Unsupported(pod)
	require.ErrorIs(t, err, cri.ErrUnsupported)
	assert.Contains(t, err.Error(), `volume "cache" needs its content prepared, and the syncer has no volume manager`)
	assert.NotContains(t, err.Error(), "probe manager")
}
