package containerhook_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/event"
)

// A runtime runs a container's postStart hook after starting it, and
// kills the container when the hook fails.
func ExampleRunner_PostStart() {
	runner := containerhook.New(containerhook.Options{
		// The runtime's way into its containers; here the hook's command
		// fails.
		Exec: containerhook.ExecRunnerFunc(func(_ context.Context, id string, cmd []string, _ time.Duration) ([]byte, int, error) {
			return []byte("config missing"), 1, nil
		}),
		Recorder: event.RecorderFunc(func(_ runtime.Object, eventType, reason, format string, args ...any) {
			fmt.Println("event:", eventType, reason, fmt.Sprintf(format, args...))
		}),
	})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app",
			Lifecycle: &v1.Lifecycle{PostStart: &v1.LifecycleHandler{
				Exec: &v1.ExecAction{Command: []string{"/bin/setup"}},
			}},
		}}},
	}
	err := runner.PostStart(context.Background(), containerhook.Container{Pod: pod, Name: "app", ID: "process://web/app/1"})
	if errors.Is(err, containerhook.ErrPostStartHook) {
		var he *containerhook.HookError
		errors.As(err, &he)
		fmt.Println("kill the container; its start failed with", he.Reason)
		fmt.Println(he.Message)
	}
	// Output:
	// event: Warning FailedPostStartHook PostStartHook failed
	// kill the container; its start failed with PostStartHookError
	// Exec lifecycle hook ([/bin/setup]) for Container "app" in Pod "web_default(uid-1)" failed - error: command '/bin/setup' exited with 1: config missing, message: "config missing"
}

// A runtime runs a container's preStop hook within the grace period and
// stops the container with what is left.
func ExampleRunner_PreStop() {
	runner := containerhook.New(containerhook.Options{})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:      "app",
			Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}}},
		}}},
	}
	left, err := runner.PreStop(context.Background(), containerhook.Container{Pod: pod, Name: "app"}, 30)
	fmt.Println("stop with", max(left, containerhook.MinimumGracePeriodSeconds), "seconds; error:", err)
	// Output:
	// stop with 30 seconds; error: <nil>
}
