package cri_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/podworker"
)

// A container's environment comes from podenv over the agent's getter: a
// required config map key that is missing leaves the container waiting
// in CreateContainerConfigError (the pod does not fail) until a later
// sync finds it.
func ExampleOptions_env() {
	runtime := fakeapi.NewFakeRuntimeService()
	settings := map[string]string{}
	env, _ := podenv.New(podenv.ObjectsFuncs{ConfigMap: func(_ context.Context, _, name string) (*v1.ConfigMap, error) {
		if len(settings) == 0 {
			return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
		}
		return &v1.ConfigMap{Data: settings}, nil
	}}, podenv.Options{})
	syncer, err := cri.New(runtime, runtime, cri.Options{Env: env})
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "server", Image: "busybox:1", Command: []string{"httpd", "-f"},
			Env: []v1.EnvVar{{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "web"}, Key: "mode"}}}},
		}}},
	}
	ctx := context.Background()
	show := func() {
		status, _ := syncer.PodStatus(ctx, pod.UID, time.Time{})
		api := status.APIStatus(pod)
		if w := api.ContainerStatuses[0].State.Waiting; w != nil {
			fmt.Println(api.Phase, w.Reason+":", w.Message)
		} else {
			fmt.Println(api.Phase, "running:", api.ContainerStatuses[0].State.Running != nil)
		}
	}

	_, err = syncer.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, nil)
	fmt.Println("retry:", podenv.IsConfigError(err))
	show()

	settings["mode"] = "production"
	_, err = syncer.SyncPod(ctx, podworker.SyncPodSync, pod, nil, nil)
	fmt.Println("error:", err)
	show()
	// Output:
	// retry: true
	// Pending CreateContainerConfigError: configmaps "web" not found
	// error: <nil>
	// Running running: true
}

// A pod that needs a primitive the syncer was not given is refused, never
// run with the feature ignored: admission can ask Unsupported, and SyncPod
// leaves its containers waiting.
func ExampleSyncer_Unsupported() {
	runtime := fakeapi.NewFakeRuntimeService()
	syncer, _ := cri.New(runtime, runtime, cri.Options{}) // no Probes, Deadline or Volumes
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "server", Image: "busybox:1",
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}},
		}}},
	}
	fmt.Println(syncer.Unsupported(pod))
	// Output:
	// cri: unsupported pod feature: pod default/web (web-1): container "server" has probes, and the syncer has no probe manager to run them (Options.Probes, UsePodFeatures)
}
