package nodestatus

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func testNode(name string) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourceCPU:  resource.MustParse("2"),
		v1.ResourcePods: resource.MustParse("110"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "pool", Value: "a", Effect: v1.TaintEffectNoSchedule}}},
		Status:     v1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
}

// TestRegistrationRegistersADeletedNodeAgain: the Node deleted while Run
// runs is created again, with its labels, taints, capacity and the
// kubelet endpoint published since it was first registered, and
// OnRegistered is told.
func TestRegistrationRegistersADeletedNodeAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := fake.NewClientset()
	registered := make(chan *v1.Node, 4)
	r := &Registration{
		Client:        client,
		Node:          testNode("n1"),
		RetryInterval: time.Millisecond,
		OnRegistered:  func(_ context.Context, n *v1.Node) { registered <- n },
	}
	_, err := r.Register(ctx)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	select {
	case <-r.synced:
	case <-ctx.Done():
		t.Fatal("Run's informer never synced")
	}
	require.NoError(t, PublishKubeletEndpoint(ctx, client.CoreV1(), "n1", net.IPv4(10, 1, 2, 3), 10250))
	// The informer sees the endpoint before the Node goes.
	require.NoError(t, wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.last.Status.DaemonEndpoints.KubeletEndpoint.Port == 10250, nil
	}))
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}))

	var again *v1.Node
	select {
	case again = <-registered:
	case <-ctx.Done():
		t.Fatal("the deleted Node was not registered again")
	}
	stored, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err, "the Node exists again")
	for _, n := range []*v1.Node{again, stored} {
		assert.Equal(t, "a", n.Labels["pool"])
		assert.Equal(t, testNode("n1").Spec.Taints, n.Spec.Taints)
		assert.Equal(t, int32(10250), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		assert.Equal(t, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.2.3"}, {Type: v1.NodeHostName, Address: "n1"}}, n.Status.Addresses)
		assert.True(t, n.Status.Capacity.Cpu().Equal(resource.MustParse("2")), "capacity kept: %v", n.Status.Capacity)
	}

	// A heartbeat's NotFound for a Node that exists creates nothing.
	r.NodeMissing()
	cancel()
	require.NoError(t, <-done)
	select {
	case n := <-registered:
		t.Fatalf("registered again although the Node existed: %v", n.Name)
	default:
	}
}

// TestRegistrationCreatesAMissingNodeAtStart: a Node deleted between
// Register and Run is created at Run's first list.
func TestRegistrationCreatesAMissingNodeAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := fake.NewClientset()
	registered := make(chan *v1.Node, 1)
	r := &Registration{Client: client, Node: testNode("n2"), OnRegistered: func(_ context.Context, n *v1.Node) { registered <- n }}
	_, err := r.Register(ctx)
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case n := <-registered:
		assert.Equal(t, "n2", n.Name)
	case <-ctx.Done():
		t.Fatal("the missing Node was not registered")
	}
	cancel()
	require.NoError(t, <-done)
}

func TestRegistrationNeedsClientAndNode(t *testing.T) {
	_, err := (&Registration{Node: testNode("x")}).Register(context.Background())
	require.ErrorContains(t, err, "nodestatus: Registration needs Client")
	require.ErrorContains(t, (&Registration{Client: fake.NewClientset()}).Run(context.Background()), "nodestatus:")
}

// TestHeartbeatGivesTheLeaseToTheNewNode: a Lease owned by a Node that was
// deleted and registered again is given to the new Node, so the garbage
// collector does not delete it; a NotFound Node is reported missing.
func TestHeartbeatGivesTheLeaseToTheNewNode(t *testing.T) {
	ctx := context.Background()
	old := testNode("n3")
	old.UID = "uid-old"
	client := fake.NewClientset(old)
	missing := 0
	hb := &Heartbeat{Client: client, NodeName: "n3", OnNodeMissing: func() { missing++ }}
	require.NoError(t, hb.Beat(ctx))
	lease, err := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n3", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, lease.OwnerReferences, 1)
	assert.Equal(t, old.UID, lease.OwnerReferences[0].UID)

	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "n3", metav1.DeleteOptions{}))
	require.Error(t, hb.Beat(ctx), "a beat of a missing Node fails")
	assert.Equal(t, 1, missing, "the missing Node is reported")

	renewed := testNode("n3")
	renewed.UID = "uid-new"
	_, err = client.CoreV1().Nodes().Create(ctx, renewed, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, hb.Beat(ctx))
	lease, err = client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n3", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, lease.OwnerReferences, 1)
	assert.Equal(t, renewed.UID, lease.OwnerReferences[0].UID, "the Lease belongs to the Node registered again")
}

// beatActions returns what one beat asked of the API server, as
// "verb resource[/subresource]".
func beatActions(t *testing.T, client *fake.Clientset, hb *Heartbeat) []string {
	t.Helper()
	client.ClearActions()
	require.NoError(t, hb.Beat(context.Background()))
	var out []string
	for _, a := range client.Actions() {
		r := a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		out = append(out, a.GetVerb()+" "+r)
	}
	return out
}

// TestHeartbeatReportsTheStatusOnChangeOrAfterTheReportInterval: with a
// StatusReportInterval, a beat that would not change the Ready condition
// only renews the Lease, in one request; a change (the node turns
// unhealthy, or the controller marked it Unknown) and the end of the
// interval are patched at the next beat.
func TestHeartbeatReportsTheStatusOnChangeOrAfterTheReportInterval(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	client := fake.NewClientset(testNode("n4"))
	var health error
	hb := &Heartbeat{Client: client, NodeName: "n4", Clock: clk, StatusReportInterval: 5 * time.Minute, Health: func() error { return health }}
	patch, get, renew := "patch nodes/status", "get nodes", "update leases"

	assert.Equal(t, []string{get, patch, "get leases", "create leases"}, beatActions(t, client, hb), "the first beat reports and creates the Lease")
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{get, renew}, beatActions(t, client, hb), "nothing changed: the Lease alone, not read first")

	health = errors.New("disk full")
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{get, patch, renew}, beatActions(t, client, hb), "unhealthy: reported at once")
	node, err := client.CoreV1().Nodes().Get(context.Background(), "n4", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, node.Status.Conditions, 1)
	assert.Equal(t, v1.ConditionFalse, node.Status.Conditions[0].Status)
	health = nil
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{get, patch, renew}, beatActions(t, client, hb), "healthy again: reported at once")

	// The node lifecycle controller marks the node Unknown.
	node, err = client.CoreV1().Nodes().Get(context.Background(), "n4", metav1.GetOptions{})
	require.NoError(t, err)
	node.Status.Conditions[0].Status = v1.ConditionUnknown
	_, err = client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{get, patch, renew}, beatActions(t, client, hb), "marked Unknown by someone else: reported again")

	clk.Step(4 * time.Minute)
	assert.Equal(t, []string{get, renew}, beatActions(t, client, hb))
	clk.Step(time.Minute)
	assert.Equal(t, []string{get, patch, renew}, beatActions(t, client, hb), "the report interval is over")

	// Without an interval, every beat reports.
	hb.StatusReportInterval = 0
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{get, patch, renew}, beatActions(t, client, hb))
}

// TestHeartbeatReadsTheLeaseAgainWhenItsRenewalFails: the Lease deleted
// behind the Heartbeat's back is created again at the next beat.
func TestHeartbeatReadsTheLeaseAgainWhenItsRenewalFails(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(testNode("n5"))
	hb := &Heartbeat{Client: client, NodeName: "n5"}
	require.NoError(t, hb.Beat(ctx))
	require.NoError(t, client.CoordinationV1().Leases(LeaseNamespace).Delete(ctx, "n5", metav1.DeleteOptions{}))
	assert.Equal(t, []string{"get nodes", "patch nodes/status", "update leases", "get leases", "create leases"}, beatActions(t, client, hb))
	_, err := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n5", metav1.GetOptions{})
	require.NoError(t, err, "the Lease is back")
}
