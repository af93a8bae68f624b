package podconfig_test

import (
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// event is one recorded event.
type event struct {
	Object    runtime.Object
	Type      string
	Reason    string
	Message   string
	ObjectKey string
}

// events is a Recorder that keeps what it is given.
type events struct {
	mu   sync.Mutex
	list []event
}

func (e *events) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := ""
	switch o := obj.(type) {
	case *v1.Pod:
		key = mirror.PodFullName(o)
	case *v1.ObjectReference:
		key = o.Kind + "/" + o.Name
	}
	e.list = append(e.list, event{Object: obj, Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...), ObjectKey: key})
}

func (e *events) all() []event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func (e *events) reasons() []string {
	var out []string
	for _, ev := range e.all() {
		out = append(out, ev.Reason+" "+ev.ObjectKey)
	}
	return out
}

// apiPod returns an API server pod with a 30s grace period.
func apiPod(uid types.UID, name string, created int) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: uid, Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(created) * time.Second)),
		},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "app", Image: "app:1"}},
		},
	}
}
