package event_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podkit/podkit/lifecycle/event"
)

func ExampleRecorderFunc() {
	rec := event.RecorderFunc(func(obj runtime.Object, eventType, reason, msgFmt string, args ...any) {
		pod := obj.(*v1.Pod)
		fmt.Printf("%s %s %s: %s\n", pod.Name, eventType, reason, fmt.Sprintf(msgFmt, args...))
	})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	rec.Eventf(pod, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: %s", "connection refused")

	// A nil Recorder option is defaulted in one line; Discard drops the event.
	var opt event.Recorder
	event.OrDiscard(opt).Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", "web")
	// Output:
	// web Warning Unhealthy: Readiness probe failed: connection refused
}
