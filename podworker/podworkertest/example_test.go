package podworkertest_test

import (
	"context"
	"fmt"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// A FakeSyncer records the hooks the engine calls, so a test can check a
// pod's whole life as one line.
func ExampleFakeSyncer() {
	f := podworkertest.NewFakeSyncer[struct{}]()
	w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	pod := podworkertest.NewPod("uid-1", "default", "web")
	_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})
	// Wait for SyncPod to have been called before killing the pod, so the
	// create is not coalesced away.
	_ = f.WaitForTrace(ctx, pod.UID, "sync:create")
	_ = w.KillPod(ctx, pod, podworker.KillPodOptions{}) // returns once the containers are stopped
	_, _ = w.WaitForStage(ctx, pod.UID, podworker.StageFinished)

	fmt.Println(f.Trace(pod.UID))
	cancel()
	fmt.Println(<-done)
	// Output:
	// sync:create kill(30) terminated
	// <nil>
}

// Hold makes a hook slow without sleeping: the test decides when it returns.
func ExampleFakeSyncer_Hold() {
	f := podworkertest.NewFakeSyncer[struct{}]()
	w, _ := podworker.New[struct{}](f, podworker.Options[struct{}]{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()

	pod := podworkertest.NewPod("uid-1", "default", "web")
	gate := f.Hold(pod.UID, podworker.HookSyncTerminatingPod)
	_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: pod})
	_ = gate.Wait(ctx) // SyncTerminatingPod is running, and stays so
	fmt.Println("could have running containers:", w.CouldHaveRunningContainers(pod.UID))

	gate.Release()
	_, _ = w.WaitForStage(ctx, pod.UID, podworker.StageTerminated)
	fmt.Println("could have running containers:", w.CouldHaveRunningContainers(pod.UID))
	// Output:
	// could have running containers: true
	// could have running containers: false
}
