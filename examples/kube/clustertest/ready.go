package clustertest

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// readyTimeout bounds the wait for nodes to be Ready and schedulable.
const readyTimeout = 2 * time.Minute

// waitReady waits until each node is Ready, carries no not-ready taint
// and publishes its kubelet endpoint, and the default namespace's service
// account exists (pods cannot be created before it). It fails early when
// an agent stops on its own. Each poll reads all the nodes in one list
// from the API server's cache, so that waiting for a hundred nodes costs
// the control plane one request per poll, not a hundred.
func (c *Cluster) waitReady(ctx context.Context, nodes ...*Node) error {
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, n := range nodes {
			if err := n.AgentErr(); err != nil {
				return false, err
			}
		}
		list, err := c.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			pending = append(pending, fmt.Sprintf("the list of nodes (%v)", err))
			return false, nil
		}
		registered := make(map[string]*v1.Node, len(list.Items))
		for i := range list.Items {
			registered[list.Items[i].Name] = &list.Items[i]
		}
		for _, n := range nodes {
			node, ok := registered[n.Name()]
			if !ok {
				pending = append(pending, n.Name()+" (not registered)")
				continue
			}
			if why := notReady(node); why != "" {
				pending = append(pending, n.Name()+" ("+why+")")
			}
		}
		_, err = c.admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			pending = append(pending, "service account default/default ("+err.Error()+")")
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		if len(pending) > maxPendingNamed {
			pending = append(pending[:maxPendingNamed:maxPendingNamed], fmt.Sprintf("and %d more", len(pending)-maxPendingNamed))
		}
		if len(pending) > 0 {
			return fmt.Errorf("clustertest: waiting for the cluster: %w; still waiting for: %s", err, strings.Join(pending, ", "))
		}
		return fmt.Errorf("clustertest: waiting for the cluster: %w", err)
	}
	return nil
}

// maxPendingNamed bounds how many of the things still awaited a failed
// waitReady names.
const maxPendingNamed = 10

// notReady says why node cannot take pods yet, or "" when it can.
func notReady(node *v1.Node) string {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
			ready = true
		}
	}
	switch {
	case !ready:
		return "not Ready"
	case nodeTaintedNotReady(node):
		return "the not-ready taint is not lifted yet"
	}
	return ""
}
