package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/events"
	"github.com/podkit/podkit/lifecycle/event"
)

// LeaseNamespace is the namespace of the node heartbeat leases.
const LeaseNamespace = "kube-node-lease"

// The reasons of the Node's Ready condition, the kubelet's: dashboards and
// alerts built for kubelet nodes match on them.
const (
	nodeReadyReason    = "KubeletReady"
	nodeNotReadyReason = "KubeletNotReady"
)

// Register makes sure the Node node exists and returns the stored
// object. It creates node; when a Node of that name already exists (the
// agent restarted, or the node was registered by hand) it reuses that one as
// it is, and returns it. node is not modified.
//
// A node identity (system:node:<name> under the NodeRestriction admission
// plugin) may only register the Node of its own name; other errors come from
// the API server unchanged.
func Register(ctx context.Context, nodes corev1client.NodesGetter, node *v1.Node) (*v1.Node, error) {
	if node == nil || node.Name == "" {
		return nil, errors.New("nodestatus: Register: the node has no name")
	}
	created, err := nodes.Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("nodestatus: registering node %q: %w", node.Name, err)
	}
	existing, err := nodes.Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("nodestatus: node %q exists but reading it failed: %w", node.Name, err)
	}
	return existing, nil
}

// Heartbeat tells the control plane the node is alive, as a kubelet
// does: it sets the Node's Ready condition and renews the node's Lease in
// LeaseNamespace. Without it a real cluster's node lifecycle controller
// marks the node unreachable and evicts its pods.
//
// The zero value is not usable: set Client and NodeName. It is safe to call
// Beat from one goroutine at a time; Run does so.
type Heartbeat struct {
	// Client is the clientset to write through (required). A node identity
	// may write its own Node's status and Lease.
	Client kubernetes.Interface
	// NodeName names the Node (required).
	NodeName string
	// Interval is the time between two beats. Defaults to 10 seconds.
	Interval time.Duration
	// LeaseDuration is the Lease's duration. Defaults to 40 seconds, the
	// kubelet's default.
	LeaseDuration time.Duration
	// StatusReportInterval, when positive, makes a beat patch the Node's
	// Ready condition only when the patch would change it (no Ready
	// condition is stored, or one of another status, reason or message)
	// or when StatusReportInterval has passed since this Heartbeat last
	// patched it; the beats between only renew the Lease, which is what
	// the node lifecycle controller watches for liveness. The kubelet's
	// default is 5 minutes (its nodeStatusReportFrequency). Zero patches
	// the status at every beat.
	StatusReportInterval time.Duration
	// Clock gives the time of each beat and the ticker of Run. Defaults to
	// the real clock.
	Clock clock.WithTicker
	// Health, when set, is asked at each beat whether the node can run
	// pods: an error posts Ready False (reason KubeletNotReady, the error
	// as message), as the kubelet posts NotReady while its node shuts
	// down. Nil, or a nil error, posts Ready True (reason KubeletReady).
	// The reasons are the kubelet's, which dashboards and alerts match
	// on. It is called from the beat's goroutine and must not block.
	Health func() error
	// Recorder, when set, receives a Normal NodeReady or NodeNotReady event
	// on the Node each time a beat changes the status of its Ready
	// condition (or posts the first one), as the kubelet records them.
	Recorder event.Recorder
	// OnNodeMissing, when set, is called from the beat's goroutine when
	// the Node is not found (deleted): Registration.NodeMissing, so the
	// Node is registered again. It must not block.
	OnNodeMissing func()

	// reported is when a beat last patched the status.
	reported time.Time
	// lease is the Lease as the last beat wrote it, renewed by the next
	// without reading it first; nil when unknown.
	lease *coordinationv1.Lease
}

func (h *Heartbeat) clock() clock.WithTicker {
	if h.Clock == nil {
		return clock.RealClock{}
	}
	return h.Clock
}

// Run beats at once and then every Interval until ctx ends, and returns
// nil then. A failed beat is retried at the next tick; Run returns an error
// only when it is misconfigured.
func (h *Heartbeat) Run(ctx context.Context) error {
	if h.Client == nil || h.NodeName == "" {
		return errors.New("nodestatus: Heartbeat needs Client and NodeName")
	}
	interval := h.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	ticker := h.clock().NewTicker(interval)
	defer ticker.Stop()
	for {
		_ = h.Beat(ctx) // errors are retried at the next tick
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// Beat does one heartbeat: it patches the Ready condition (True, with this
// beat's time) onto the Node's status and creates or renews its Lease. It
// returns the first error; the Lease is renewed even when the status patch
// fails.
func (h *Heartbeat) Beat(ctx context.Context) error {
	now := metav1.NewTime(h.clock().Now())
	node, statusErr := h.patchReady(ctx, now)
	leaseErr := h.renewLease(ctx, now, node)
	return errors.Join(statusErr, leaseErr)
}

// patchReady posts the Ready condition and returns the Node it read (nil
// when it could not read it).
func (h *Heartbeat) patchReady(ctx context.Context, now metav1.Time) (*v1.Node, error) {
	node, err := h.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && h.OnNodeMissing != nil {
			h.OnNodeMissing()
		}
		return nil, fmt.Errorf("nodestatus: heartbeat of node %q: %w", h.NodeName, err)
	}
	ready := v1.NodeCondition{
		Type:              v1.NodeReady,
		Status:            v1.ConditionTrue,
		Reason:            nodeReadyReason,
		Message:           "podkit agent is posting ready status",
		LastHeartbeatTime: now,
	}
	if h.Health != nil {
		if err := h.Health(); err != nil {
			ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, nodeNotReadyReason, err.Error()
		}
	}
	ready.LastTransitionTime = now
	changed, same := true, false
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status == ready.Status {
			ready.LastTransitionTime = c.LastTransitionTime
			changed = false
			same = c.Reason == ready.Reason && c.Message == ready.Message
		}
	}
	if same && h.StatusReportInterval > 0 && !h.reported.IsZero() && now.Sub(h.reported) < h.StatusReportInterval {
		return node, nil // nothing to tell yet: the Lease says the node lives
	}
	// Conditions merge by type, so only Ready is touched.
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": []v1.NodeCondition{ready}},
	})
	if err != nil {
		return node, err
	}
	if _, err := h.Client.CoreV1().Nodes().PatchStatus(ctx, h.NodeName, patch); err != nil {
		return node, fmt.Errorf("nodestatus: heartbeat of node %q: patching its status: %w", h.NodeName, err)
	}
	h.reported = now.Time
	if changed && h.Recorder != nil {
		reason := events.ReasonNodeReady
		if ready.Status != v1.ConditionTrue {
			reason = events.ReasonNodeNotReady
		}
		h.Recorder.Eventf(events.NodeRef(node), v1.EventTypeNormal, reason, "%s", events.NodeStatusMessage(h.NodeName, reason))
	}
	return node, nil
}

// nodeOwner is the owner reference of a Lease to node.
func nodeOwner(node *v1.Node) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
}

// renewLease creates or renews the Lease. node is the Node this beat read,
// or nil: a Lease is owned by it (the garbage collector deletes the Lease
// of a deleted Node), and a Lease still owned by a Node deleted and
// registered again is given to the new one, so the collector leaves it.
func (h *Heartbeat) renewLease(ctx context.Context, now metav1.Time, node *v1.Node) error {
	duration := h.LeaseDuration
	if duration <= 0 {
		duration = 40 * time.Second
	}
	leases := h.Client.CoordinationV1().Leases(LeaseNamespace)
	renew := metav1.NewMicroTime(now.Time)
	if h.lease != nil {
		// Renew the Lease this Heartbeat wrote last, without reading it:
		// one request a beat. A conflict (someone else wrote it) or its
		// loss falls back to reading it.
		if err := h.updateLease(ctx, h.lease.DeepCopy(), renew, duration, node); err == nil {
			return nil
		}
		h.lease = nil
	}
	lease, err := leases.Get(ctx, h.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: h.NodeName, Namespace: LeaseNamespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(h.NodeName),
				LeaseDurationSeconds: ptr.To(int32(duration / time.Second)),
				RenewTime:            &renew,
			},
		}
		if node != nil {
			lease.OwnerReferences = nodeOwner(node)
		}
		created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("nodestatus: creating the lease of node %q: %w", h.NodeName, err)
		}
		h.lease = created
		return nil
	case err != nil:
		return fmt.Errorf("nodestatus: reading the lease of node %q: %w", h.NodeName, err)
	}
	return h.updateLease(ctx, lease, renew, duration, node)
}

// updateLease renews lease (the stored one, or the one last written) and
// keeps what the API server stored.
func (h *Heartbeat) updateLease(ctx context.Context, lease *coordinationv1.Lease, renew metav1.MicroTime, duration time.Duration, node *v1.Node) error {
	lease.Spec.RenewTime = &renew
	lease.Spec.HolderIdentity = ptr.To(h.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(duration / time.Second))
	if node != nil && (len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != node.UID) {
		lease.OwnerReferences = nodeOwner(node)
	}
	updated, err := h.Client.CoordinationV1().Leases(LeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("nodestatus: renewing the lease of node %q: %w", h.NodeName, err)
	}
	h.lease = updated
	return nil
}
