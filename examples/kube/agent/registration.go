package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/kube/nodestatus"
	"github.com/podkit/podkit/examples/kube/statuswriter"
)

// newRegistration returns the registration of the agent's Node: Run
// registers it, and the "node registration" loop registers it again when
// it is deleted while the agent runs. Then the agent takes the new Node
// (admission reads its allocatable resources) and checks the status of
// every pod it runs in the API server again, writing it where it differs.
// The mirror pods, owned by the deleted Node and so deleted by the garbage
// collector, are created again by housekeeping, and their statuses written
// when the sync loop sees them.
func (a *Agent) newRegistration(writer *statuswriter.Writer) *nodestatus.Registration {
	want := a.cfg.Node
	if want == nil {
		want = NodeObject(a.cfg.NodeName)
	}
	return &nodestatus.Registration{
		Client: a.cfg.Client,
		Node:   want,
		Logger: a.log.WithName("registration"),
		OnRegistered: func(_ context.Context, node *v1.Node) {
			a.node.Store(node)
			writer.EnqueueAll()
			a.log.Info("Writing the statuses of the node's pods again, after its Node was registered again", "uid", node.UID)
		},
	}
}
