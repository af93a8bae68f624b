package lifecycle_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// A whole agent: one constructor builds the pod workers, the desired pod
// store, the config merge and the sync loop; a source is added as a value;
// Run runs them all. Here the node has room for one pod, so the second is
// rejected, and a runtime event makes the running pod sync again.
func ExampleAgent() {
	syncer := podworkertest.NewFakeSyncer[struct{}]()
	maxPods, _ := admission.NewMaxPodsHandler(1)
	rejected := make(chan string, 1)
	agent, err := lifecycle.NewAgent[struct{}](syncer, lifecycle.AgentOptions[struct{}]{
		SyncLoop: lifecycle.SyncLoopOptions{
			AdmitHandlers: []admission.Handler{maxPods},
			OnReject: func(_ context.Context, pod *v1.Pod, status v1.PodStatus) {
				rejected <- pod.Name + ": " + status.Reason + ": " + status.Message
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The API server source: here, two snapshots from a channel.
	web := podworkertest.NewPod("web-uid", "default", "web")
	batch := podworkertest.NewPod("batch-uid", "default", "batch")
	batch.CreationTimestamp = metav1.Unix(1, 0) // added after web
	snapshots := make(chan []*v1.Pod, 2)
	snapshots <- []*v1.Pod{batch, web}
	api, _ := podconfig.NewSource(mirror.ApiserverSource, func(ctx context.Context, sink podconfig.PodSink) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case pods := <-snapshots:
				if err := sink.SetPods(ctx, mirror.ApiserverSource, pods); err != nil {
					return err
				}
			}
		}
	})
	_ = agent.AddSource(api)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx) }()

	_ = syncer.WaitForTrace(ctx, web.UID, "sync:create")
	fmt.Println(<-rejected)

	// A container of web exited: the runtime tells the agent, by UID.
	agent.RequestSync(web.UID)
	_ = syncer.WaitForTrace(ctx, web.UID, "sync:create sync:sync")

	// The API server no longer has the pods: web is stopped.
	snapshots <- nil
	_, _ = agent.Workers().WaitForStage(ctx, web.UID, podworker.StageFinished)
	fmt.Println("web:", syncer.Trace(web.UID))
	fmt.Println("batch:", syncer.Trace(batch.UID) == "")

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// batch: OutOfpods: Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1
	// web: sync:create sync:sync kill(30) terminated
	// batch: true
	// Run: <nil>
}

// The per-pod features, built once by the assembly: the agent gives how
// to run a command in a container, how to read secrets and config maps,
// and where volumes go; the runtime's hooks use what Features returns, and
// Run runs and stops their loops with the rest.
func ExampleAgent_Features() {
	exec := probe.ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		return nil, 0, nil
	})
	objects := podenv.ObjectsFuncs{ConfigMap: func(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"level": "debug"}}, nil
	}}
	agent, err := lifecycle.NewAgent[struct{}](podworkertest.NewFakeSyncer[struct{}](), lifecycle.AgentOptions[struct{}]{
		Features: &lifecycle.PodFeatureOptions{Exec: exec, Objects: objects},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	f := agent.Features()
	fmt.Println("probes, hooks, deadline, env:", f.Probes != nil, f.Hooks != nil, f.Deadline != nil, f.Env != nil)
	fmt.Println("volumes (no VolumeRoot):", f.Volumes != nil)

	pod := podworkertest.NewPod("web-uid", "default", "web")
	pod.Spec.Containers = []v1.Container{{Name: "app", Env: []v1.EnvVar{{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{
		ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Key: "level"},
	}}}}}
	env, err := f.Env.Build(context.Background(), pod, &pod.Spec.Containers[0], podenv.Inputs{})
	fmt.Println(env, err)
	// Output:
	// probes, hooks, deadline, env: true true true true
	// volumes (no VolumeRoot): false
	// [{LEVEL debug}] <nil>
}
