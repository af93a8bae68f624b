package cri

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/podworker"
)

// PodStatus is the runtime's view of one pod, read through the CRI: every
// sandbox and every container the runtime holds for the pod's UID. It is
// the T of the Syncer's podworker.PodSyncer: the engine reads it (through
// Syncer.PodStatus) right before each hook.
//
// A PodStatus is a snapshot; it is never updated in place. The proto
// messages it points to are shared: do not mutate them.
type PodStatus struct {
	// UID is the pod's UID.
	UID types.UID
	// Name and Namespace come from the newest sandbox's metadata; they are
	// empty when the runtime has no sandbox for the pod.
	Name, Namespace string
	// Sandboxes are the pod's sandboxes, newest first. At most one is
	// normally ready; older ones are left over from sandboxes that died
	// and were replaced.
	Sandboxes []*runtimeapi.PodSandboxStatus
	// Containers are the pod's containers in every sandbox, newest first.
	// A container restarted in place appears once per attempt.
	Containers []ContainerStatus
	// Timestamp is when the runtime was asked (the syncer's clock).
	Timestamp time.Time
	// RuntimeName is the scheme of container IDs in the API status
	// (Options.RuntimeName); "cri" when empty.
	RuntimeName string
	// HostIPs are the node's addresses (Options.NodeIPs): the API status's
	// HostIPs, and the PodIPs of a host-network pod.
	HostIPs []string
	// Waiting holds, by container name, why the syncer could not create or
	// start the container's next instance (the syncer's memory, not the
	// runtime's): the API status shows it while no instance of that
	// attempt exists.
	Waiting map[string]Waiting
}

// ContainerStatus is one container of a pod as the runtime reports it,
// with the sandbox it belongs to (which the CRI's container status leaves
// out).
type ContainerStatus struct {
	// SandboxID is the ID of the container's sandbox.
	SandboxID string
	*runtimeapi.ContainerStatus
}

// ReadySandbox returns the newest sandbox in the ready state, or nil.
func (s *PodStatus) ReadySandbox() *runtimeapi.PodSandboxStatus {
	if s == nil {
		return nil
	}
	for _, sb := range s.Sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return sb
		}
	}
	return nil
}

// IPs returns the pod's IP addresses (the primary first) as the runtime's
// network plugin assigned them to the newest ready sandbox, or to the
// newest sandbox when none is ready. A host-network pod has none: its
// address is the node's.
func (s *PodStatus) IPs() []string {
	sb := s.ReadySandbox()
	if sb == nil && s != nil && len(s.Sandboxes) > 0 {
		sb = s.Sandboxes[0]
	}
	nw := sb.GetNetwork()
	if nw.GetIp() == "" {
		return nil
	}
	ips := []string{nw.GetIp()}
	for _, ip := range nw.GetAdditionalIps() {
		if ip.GetIp() != "" {
			ips = append(ips, ip.GetIp())
		}
	}
	return ips
}

// Running reports whether anything of the pod may be running: a ready
// sandbox, or a container that is running or in an unknown state.
func (s *PodStatus) Running() bool {
	if s.ReadySandbox() != nil {
		return true
	}
	for _, c := range s.containers() {
		if mayRun(c.GetState()) {
			return true
		}
	}
	return false
}

// mayRun reports whether a container in state st may be running.
func mayRun(st runtimeapi.ContainerState) bool {
	return st == runtimeapi.ContainerState_CONTAINER_RUNNING || st == runtimeapi.ContainerState_CONTAINER_UNKNOWN
}

// containers is nil-safe access to s.Containers.
func (s *PodStatus) containers() []ContainerStatus {
	if s == nil {
		return nil
	}
	return s.Containers
}

// latest returns the newest container named name, in sandbox sandboxID
// when that is not empty, else in any sandbox; nil when there is none.
func (s *PodStatus) latest(name, sandboxID string) *ContainerStatus {
	for i, c := range s.containers() {
		if c.GetMetadata().GetName() == name && (sandboxID == "" || c.SandboxID == sandboxID) {
			return &s.Containers[i]
		}
	}
	return nil
}

// previous returns the newest container named name that is older than
// cur, in any sandbox; nil when there is none.
func (s *PodStatus) previous(cur *ContainerStatus) *ContainerStatus {
	seen := false
	for i, c := range s.containers() {
		if c.GetId() == cur.GetId() {
			seen = true
			continue
		}
		if seen && c.GetMetadata().GetName() == cur.GetMetadata().GetName() {
			return &s.Containers[i]
		}
	}
	return nil
}

// nextAttempt returns the attempt number for a new instance of the
// container named name: one more than the newest instance's, or 0.
func (s *PodStatus) nextAttempt(name string) uint32 {
	if c := s.latest(name, ""); c != nil {
		return c.GetMetadata().GetAttempt() + 1
	}
	return 0
}

// PodStatus reads the pod's status from the runtime: ListPodSandbox and
// ListContainers filtered by the pod UID label, then PodSandboxStatus and
// ContainerStatus for each. It implements podworker.StatusSource: the
// status is read when called, so it is always newer than newerThan and
// PodStatus never waits. Safe for concurrent use. A sandbox or container
// removed while it runs is left out; any other runtime error is returned
// (the engine then retries the hook with backoff).
func (s *Syncer) PodStatus(ctx context.Context, uid types.UID, newerThan time.Time) (*PodStatus, error) {
	st := &PodStatus{UID: uid, Timestamp: s.opts.Clock.Now(), RuntimeName: s.opts.RuntimeName, HostIPs: s.opts.NodeIPs, Waiting: s.waiting.of(uid)}
	sandboxes, err := s.sandboxes.ListPodSandbox(ctx, sandboxFilter(uid))
	if err != nil {
		return nil, fmt.Errorf("cri: listing the sandboxes of pod %s: %w", uid, err)
	}
	for _, sb := range sandboxes {
		resp, err := s.sandboxes.PodSandboxStatus(ctx, sb.GetId(), false)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cri: reading the status of sandbox %s of pod %s: %w", sb.GetId(), uid, err)
		}
		if resp.GetStatus() != nil {
			st.Sandboxes = append(st.Sandboxes, resp.GetStatus())
		}
	}
	containers, err := s.containers.ListContainers(ctx, containerFilter(uid))
	if err != nil {
		return nil, fmt.Errorf("cri: listing the containers of pod %s: %w", uid, err)
	}
	for _, c := range containers {
		resp, err := s.containers.ContainerStatus(ctx, c.GetId(), false)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cri: reading the status of container %s of pod %s: %w", c.GetId(), uid, err)
		}
		if resp.GetStatus() != nil {
			st.Containers = append(st.Containers, ContainerStatus{SandboxID: c.GetPodSandboxId(), ContainerStatus: resp.GetStatus()})
		}
	}
	slices.SortStableFunc(st.Sandboxes, func(a, b *runtimeapi.PodSandboxStatus) int {
		return newestFirst(a.GetCreatedAt(), b.GetCreatedAt(), a.GetMetadata().GetAttempt(), b.GetMetadata().GetAttempt())
	})
	slices.SortStableFunc(st.Containers, func(a, b ContainerStatus) int {
		return newestFirst(a.GetCreatedAt(), b.GetCreatedAt(), a.GetMetadata().GetAttempt(), b.GetMetadata().GetAttempt())
	})
	if len(st.Sandboxes) > 0 {
		st.Name = st.Sandboxes[0].GetMetadata().GetName()
		st.Namespace = st.Sandboxes[0].GetMetadata().GetNamespace()
	}
	return st, nil
}

// newestFirst orders by creation time, then attempt, both descending.
func newestFirst(createdA, createdB int64, attemptA, attemptB uint32) int {
	switch {
	case createdA != createdB:
		if createdA > createdB {
			return -1
		}
		return 1
	case attemptA > attemptB:
		return -1
	case attemptA < attemptB:
		return 1
	}
	return 0
}

// NothingRunning reports whether status positively shows that nothing of
// the pod runs: no ready sandbox and no running container. A nil status
// shows nothing, so it reports false. It implements
// podworker.StoppedChecker and never blocks.
func (s *Syncer) NothingRunning(status *PodStatus) bool {
	return status != nil && !status.Running()
}

// isNotFound reports whether err is the runtime saying the object does not
// exist.
func isNotFound(err error) bool {
	return err != nil && grpcstatus.Code(err) == codes.NotFound
}

var (
	_ podworker.StatusSource[*PodStatus]   = (*Syncer)(nil)
	_ podworker.StoppedChecker[*PodStatus] = (*Syncer)(nil)
)
