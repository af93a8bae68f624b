package probe_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/podworker"
)

// A runtime's SyncPod reports its pod's status to the manager, which
// fills in readiness from an httpGet readiness probe and asks for a sync
// once the probe passes.
func Example() {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer app.Close()
	_, portText, _ := net.SplitHostPort(app.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)

	// The pod workers are the window the manager asks; a pod they run
	// may be probed. (An agent has them already.)
	workers, _ := podworker.New[struct{}](podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})

	synced := make(chan types.UID, 1)
	m, err := probe.New(workers, probe.Options{RequestSync: func(uid types.UID) { synced <- uid }})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app",
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{
				HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(port)},
			}},
		}}},
	}
	startedAt := metav1.Now()
	status := func() *v1.PodStatus { // what the runtime found: the same run each time
		return &v1.PodStatus{
			Phase: v1.PodRunning,
			PodIP: "127.0.0.1",
			ContainerStatuses: []v1.ContainerStatus{{
				Name:        "app",
				ContainerID: "process://web/app/1",
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: startedAt}},
			}},
		}
	}

	st := status()
	_ = m.UpdatePodStatus(pod, st)
	fmt.Println("first sync: ready =", st.ContainerStatuses[0].Ready)

	fmt.Println("sync requested for", <-synced)
	st = status()
	_ = m.UpdatePodStatus(pod, st)
	for _, c := range st.Conditions {
		fmt.Println(c.Type, c.Status)
	}

	cancel()
	<-done
	// Output:
	// first sync: ready = false
	// sync requested for uid-1
	// ContainersReady True
	// Ready True
}
