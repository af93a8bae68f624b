package virtualkubelet

import (
	"context"
	"errors"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Errors a Backend returns (wrapped or as they are; the provider tests them
// with errors.Is). Any other error is a failure the provider retries.
var (
	// ErrNotFound: the backend has no pod with this UID.
	ErrNotFound = errors.New("virtualkubelet: pod not found in the backend")
	// ErrAlreadyExists: Create was called for a UID the backend already has.
	// The provider takes it as success: a retried Create whose first attempt
	// did reach the backend.
	ErrAlreadyExists = errors.New("virtualkubelet: pod already exists in the backend")
)

// Backend is the remote system that runs the pods: a cloud container
// service, a batch system, a simulator. It is what a provider author
// implements; the Provider turns the PodController's calls into calls of
// it, from the engine's worker goroutines, one at a time per pod UID and
// concurrently for different UIDs.
//
// Every method may block (it is a remote call) and must return when ctx
// ends. The provider never mutates what it passes in and owns what is
// returned. Pods are keyed by UID, never by name: two pods with the same
// namespace and name but different UIDs are different pods, and may both
// exist while the older one stops.
type Backend interface {
	// Create starts the pod's containers. It returns an error wrapping
	// ErrAlreadyExists when the backend already has the UID.
	Create(ctx context.Context, pod *v1.Pod) error
	// Stop stops every container of the pod, giving each up to grace to
	// exit. It returns only when none runs, and an error wrapping
	// ErrNotFound when the backend has no such pod. Stopping a stopped pod
	// succeeds.
	Stop(ctx context.Context, uid types.UID, grace time.Duration) error
	// Remove releases everything the backend holds for a stopped pod. It
	// returns an error wrapping ErrNotFound when there is nothing to remove.
	Remove(ctx context.Context, uid types.UID) error
	// Status returns the pod as the backend sees it, or an error wrapping
	// ErrNotFound.
	Status(ctx context.Context, uid types.UID) (*RemotePod, error)
}

// BackendLister is an optional interface of a Backend. With it, the
// provider finds pods the backend runs that no pod of the API server owns
// (left over from an earlier run, or created by a call the provider
// believed had failed) and stops and removes them; GetPods lists them too.
type BackendLister interface {
	// List returns every pod the backend has, stopped ones included.
	List(ctx context.Context) ([]RemotePod, error)
}

// BackendUpdater is an optional interface of a Backend. With it, a change
// of a running pod's container images (the one spec change the API server
// allows besides tolerations and the active deadline) is applied with
// Update; without it the backend keeps running the images it was created
// with, and the pod's status reports them.
type BackendUpdater interface {
	// Update changes the images of the pod's containers to those of pod.
	// It returns an error wrapping ErrNotFound when the backend has no such
	// pod.
	Update(ctx context.Context, pod *v1.Pod) error
}

// ContainerState is where a remote container is.
type ContainerState int

const (
	// ContainerWaiting: not started yet.
	ContainerWaiting ContainerState = iota
	// ContainerRunning: started and not exited.
	ContainerRunning
	// ContainerExited: exited with ExitCode, and will not be restarted.
	ContainerExited
)

// String returns "waiting", "running" or "exited".
func (s ContainerState) String() string {
	switch s {
	case ContainerWaiting:
		return "waiting"
	case ContainerRunning:
		return "running"
	case ContainerExited:
		return "exited"
	}
	return "unknown"
}

// RemoteContainer is one container of a RemotePod.
type RemoteContainer struct {
	Name  string
	Image string
	State ContainerState
	// ExitCode is meaningful when State is ContainerExited.
	ExitCode int32
	// RestartCount is how often the backend restarted the container (it
	// applies the pod's restart policy itself).
	RestartCount int32
	// StartedAt is when the container last started; FinishedAt when it
	// exited. Zero when that has not happened.
	StartedAt, FinishedAt time.Time
}

// RemotePod is a pod as the backend sees it.
type RemotePod struct {
	UID       types.UID
	Namespace string
	Name      string
	// IP is the pod's address in the backend, if it has one.
	IP string
	// CreatedAt is when the backend accepted the pod.
	CreatedAt  time.Time
	Containers []RemoteContainer
}

// DeepCopy returns a copy of p that shares nothing with it.
func (p *RemotePod) DeepCopy() *RemotePod {
	if p == nil {
		return nil
	}
	out := *p
	out.Containers = slices.Clone(p.Containers)
	return &out
}

// Running reports whether any container of the pod may still run: one is
// running or has yet to start.
func (p *RemotePod) Running() bool {
	if p == nil {
		return false
	}
	for _, c := range p.Containers {
		if c.State != ContainerExited {
			return true
		}
	}
	return false
}

// Exited reports whether the pod has containers and all of them exited for
// good: the pod has finished on its own.
func (p *RemotePod) Exited() bool {
	return p != nil && len(p.Containers) > 0 && !p.Running()
}

// BackendMetrics is an optional interface of a Backend. With it, the
// provider serves the kubelet's stats summary (GetStatsSummary, hence
// /stats/summary) and resource metrics (GetMetricsResource, hence
// /metrics/resource) with the backend's figures; without it both list the
// node and its running pods with no usage figures.
type BackendMetrics interface {
	// Usage returns the resource usage of the pods the backend runs,
	// measured now. A pod it has no figures for is left out.
	Usage(ctx context.Context) ([]PodUsage, error)
}

// PodUsage is the resource usage of one backend pod.
type PodUsage struct {
	UID types.UID
	// Time is when the figures were taken.
	Time       time.Time
	Containers []ContainerUsage
}

// ContainerUsage is the resource usage of one container of a PodUsage.
type ContainerUsage struct {
	Name string
	// CPU is the CPU time the container used since it started (all cores).
	CPU time.Duration
	// NanoCores is its current CPU use, in billionths of a core.
	NanoCores uint64
	// MemoryWorkingSet is its memory working set, in bytes (what the
	// kubelet reports and evicts on: usage minus inactive file pages).
	MemoryWorkingSet uint64
}
