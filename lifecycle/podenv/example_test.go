package podenv_test

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/podenv/podenvtest"
)

// A runtime builds a container's environment in its SyncPod, expands the
// command with it, and keeps a container whose secret is missing waiting.
func ExampleBuilder_Build() {
	objects := &podenvtest.Objects{} // the agent's getter: watches, files, ...
	objects.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"},
		Data:       map[string]string{"MODE": "fast"},
	})
	builder, err := podenv.New(objects, podenv.Options{})
	if err != nil {
		panic(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:    "web",
			Command: []string{"/bin/serve", "--name=$(POD_NAME)", "--mode=$(MODE)"},
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}},
			Env: []v1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			},
		}}},
	}
	c := &pod.Spec.Containers[0]
	env, err := builder.Build(context.Background(), pod, c, podenv.Inputs{PodIPs: []string{"10.1.0.7"}})
	if err != nil {
		panic(err)
	}
	for _, e := range env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	command, _, _ := builder.ExpandCommandAndArgs(c, env)
	fmt.Println(command)

	// A required secret that does not exist: the container waits.
	c.Env = append(c.Env, v1.EnvVar{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "api"}, Key: "token"}}})
	_, err = builder.Build(context.Background(), pod, c, podenv.Inputs{})
	var waiting *podenv.ConfigError
	if errors.As(err, &waiting) {
		fmt.Printf("%s waits: %s: %s\n", waiting.Container, waiting.Reason(), waiting.Message)
	}
	// Output:
	// MODE=fast
	// POD_NAME=web-0
	// POD_IP=10.1.0.7
	// [/bin/serve --name=web-0 --mode=fast]
	// web waits: CreateContainerConfigError: secret "api" not found
}
