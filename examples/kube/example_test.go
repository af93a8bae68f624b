package kube_test

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podkit/podkit/examples/kube/apisource"
	"github.com/podkit/podkit/examples/kube/mirrorpods"
	"github.com/podkit/podkit/examples/kube/nodestatus"
	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// This example wires the package's pieces around a syncer that runs
// nothing, to show where each goes; package agent does the same around the
// process runtime. It needs a cluster, so it is compiled but not run.
func Example() {
	const node = "my-node"
	cfg, err := clientcmd.BuildConfigFromFlags("", "/path/to/node/kubeconfig")
	if err != nil {
		panic(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	// 1. The Node.
	if _, err := nodestatus.Register(ctx, cs.CoreV1(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		panic(err)
	}

	// 2. The status writer around the pod workers' syncer.
	writer, err := statuswriter.New(cs.CoreV1(), statuswriter.Options{})
	if err != nil {
		panic(err)
	}
	syncer := podworker.PodSyncerFuncs[struct{}]{} // your runtime here
	status := func(_ context.Context, pod *v1.Pod) (v1.PodStatus, error) {
		return v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: time.Now()}}, nil // derived from your runtime
	}

	// 3. The agent: the pod workers over the wrapped syncer, the sync loop
	// with real mirror pods, the API source, and the loops around them.
	mirrors, err := mirror.NewClient(mirrorpods.NewPodAPI(cs.CoreV1()), mirror.ClientOptions{NodeName: node, NodeUID: mirrorpods.NodeUID(cs.CoreV1(), node)})
	if err != nil {
		panic(err)
	}
	agent, err := lifecycle.NewAgent(statuswriter.WrapSyncer(syncer, writer, status), lifecycle.AgentOptions[struct{}]{
		SyncLoop: lifecycle.SyncLoopOptions{
			MirrorClient: mirrors,
			OnReject:     func(_ context.Context, pod *v1.Pod, st v1.PodStatus) { writer.SetPodStatus(pod, st) },
		},
	})
	if err != nil {
		panic(err)
	}
	source, err := apisource.New(cs.CoreV1(), node, apisource.Options{})
	if err != nil {
		panic(err)
	}
	_ = agent.AddSource(source)
	_ = agent.Add("status writer", lifecycle.RunnableFunc(func(ctx context.Context) error { return writer.Run(ctx, agent.Workers()) }))
	_ = agent.Add("heartbeat", &nodestatus.Heartbeat{Client: cs, NodeName: node})

	// 4. Run everything.
	_ = agent.Run(ctx)
}
