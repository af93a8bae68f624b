package podworker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/podworker"
)

// A minimal agent: hooks that only say what they would do, one pod created
// and killed. KillPod returns once the pod's containers are stopped; WaitFor
// then waits for the cleanup.
func Example() {
	syncer := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
			fmt.Println("start", pod.Name, "on", ut)
			return false, nil
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, _ struct{}, grace int64, _ func(*v1.PodStatus)) error {
			fmt.Printf("stop %s within %ds\n", pod.Name, grace)
			return nil
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, _ struct{}) error {
			fmt.Println("clean up", pod.Name)
			return nil
		},
	}
	w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	grace := int64(10)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Namespace: "default", Name: "web"},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
	if err := w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}); err != nil {
		panic(err)
	}
	// Let the create reach its hook before the kill (or the two coalesce).
	_, _, _ = w.WaitFor(ctx, pod.UID, func(info podworker.PodInfo, _ bool) bool { return info.Started })
	if err := w.KillPod(ctx, pod, podworker.KillPodOptions{}); err != nil {
		panic(err)
	}
	running := w.CouldHaveRunningContainers(pod.UID) // false: KillPod returned
	_, _, _ = w.WaitFor(ctx, pod.UID, func(info podworker.PodInfo, _ bool) bool { return info.Finished })
	fmt.Println("could have running containers:", running)
	fmt.Println("finished:", w.ShouldPodBeFinished(pod.UID))

	cancel()
	fmt.Println("Run:", <-done)
	fmt.Println("after Run:", w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodSync, Pod: pod}))
	// Output:
	// start web on create
	// stop web within 10s
	// clean up web
	// could have running containers: false
	// finished: true
	// Run: <nil>
	// after Run: podworker: stopped
}

// Subscribe tells of every stage change, without ever blocking the engine.
func ExamplePodWorkers_Subscribe() {
	w, _ := podworker.New[struct{}](podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()

	transitions := make(chan podworker.Transition, 16)
	sub := w.Subscribe(transitions)
	defer sub.Close()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Namespace: "default", Name: "web"}}
	_ = w.KillPod(ctx, pod, podworker.KillPodOptions{})
	_, _, _ = w.WaitFor(ctx, pod.UID, func(info podworker.PodInfo, _ bool) bool { return info.Finished })
	w.SyncKnownPods(nil) // forgets the finished worker
	for len(transitions) > 0 {
		t := <-transitions
		fmt.Println(t.From, "->", t.To)
	}
	// Output:
	// absent -> termination-requested
	// termination-requested -> terminating
	// terminating -> terminated
	// terminated -> finished
	// finished -> absent
}

// A hook's error may say when to retry; otherwise the engine backs off
// exponentially on its own.
func ExampleRetryAfter() {
	attempts := 0
	synced := make(chan struct{})
	syncer := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
			attempts++ // hooks of one pod never overlap
			if attempts < 3 {
				fmt.Println("attempt", attempts, "on", ut, "failed")
				return false, podworker.RetryAfter(errors.New("image not pulled yet"), time.Millisecond)
			}
			fmt.Println("attempt", attempts, "on", ut, "succeeded")
			close(synced)
			return false, nil
		},
	}
	w, _ := podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Namespace: "default", Name: "web"}}
	_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})
	<-synced
	// Output:
	// attempt 1 on create failed
	// attempt 2 on sync failed
	// attempt 3 on sync succeeded
}

// A kill that arrives before the pod's create terminates the UID for good:
// the later create is a restart request, and the UID starts over once
// housekeeping (SyncKnownPods) has forgotten its finished worker.
func ExamplePodWorkers_KillPod_beforeCreate() {
	synced := make(chan struct{}, 1)
	syncer := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(_ context.Context, ut podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
			fmt.Println("SyncPod", ut, pod.Name)
			synced <- struct{}{}
			return false, nil
		},
		// Nothing to stop: this SyncPod starts nothing.
		SyncTerminatingPodFunc: func(context.Context, *v1.Pod, struct{}, int64, func(*v1.PodStatus)) error { return nil },
	}
	w, _ := podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Namespace: "default", Name: "web"}}
	if err := w.KillPod(ctx, pod, podworker.KillPodOptions{}); err != nil {
		fmt.Println("kill:", err)
	}
	if err := w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}); err != nil {
		fmt.Println("create:", err)
	}
	info, _ := w.WaitForStage(ctx, pod.UID, podworker.StageFinished)
	fmt.Println("after the create:", info.Stage, "restart requested:", info.RestartRequested)

	// Start over: housekeeping forgets the worker, then the create starts it.
	w.SyncKnownPods([]*v1.Pod{pod})
	if err := w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}); err != nil {
		fmt.Println("create:", err)
	}
	<-synced
	info, _ = w.Pod(pod.UID)
	fmt.Println("after starting over:", info.Stage)
	// Output:
	// after the create: finished restart requested: true
	// SyncPod create web
	// after starting over: syncing
}

// A decorator adds to another syncer's hooks: here it logs around SyncPod,
// and leaves the other hooks to the inner syncer. The inner syncer cannot
// stop pods known only from the runtime, and neither can the decorator:
// the engine would fail and retry such a kill.
func ExampleDecorate() {
	inner := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(_ context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
			fmt.Println("start", pod.Name)
			return false, nil
		},
		SyncTerminatingPodFunc: func(_ context.Context, pod *v1.Pod, _ struct{}, grace int64, _ func(*v1.PodStatus)) error {
			fmt.Printf("stop %s within %ds\n", pod.Name, grace)
			return nil
		},
	}
	logged := podworker.Decorate[struct{}](inner, podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, pod, mirror *v1.Pod, st struct{}) (bool, error) {
			fmt.Println("SyncPod", ut, "begins")
			terminal, err := inner.SyncPod(ctx, ut, pod, mirror, st)
			fmt.Println("SyncPod", ut, "returns", terminal, err)
			return terminal, err
		},
	})

	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Namespace: "default", Name: "web"}}
	if _, err := logged.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, struct{}{}); err != nil {
		fmt.Println(err)
	}
	if err := logged.SyncTerminatingPod(ctx, pod, struct{}{}, 30, nil); err != nil {
		fmt.Println(err)
	}
	err := logged.SyncTerminatingRuntimePod(ctx, podworker.RuntimePod{UID: "uid-2", Namespace: "default", Name: "orphan"})
	fmt.Println("orphan stopped:", err == nil, "not implemented:", errors.Is(err, podworker.ErrNotImplemented))
	// Output:
	// SyncPod create begins
	// start web
	// SyncPod create returns false <nil>
	// stop web within 30s
	// orphan stopped: false not implemented: true
}
