package cri

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StatsLister is the part of the CRI's stats role the syncer uses to
// measure its pods (ListContainerStats and ListPodSandboxStats, as the
// kubelet's CRI stats provider). Client and cri-api's
// FakeRuntimeService have both.
type StatsLister interface {
	// ListContainerStats returns the stats of the containers filter
	// selects.
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	// ListPodSandboxStats returns the stats of the sandboxes filter
	// selects. A runtime that does not implement it answers Unimplemented.
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
}

// PodStats is what the runtime measured of one pod this package runs.
type PodStats struct {
	// UID, Namespace and Name identify the pod (its sandbox's labels).
	UID             types.UID
	Namespace, Name string
	// SandboxCreatedAt is when the pod's ready sandbox was created
	// (nanoseconds since the epoch): the pod's start.
	SandboxCreatedAt int64
	// Sandbox is the sandbox's own stats (pod-level CPU and memory, as
	// its cgroup counts them), or nil where the runtime gives none: it
	// may not implement ListPodSandboxStats, and containerd 1.6 fails it
	// for sandboxes without a cgroup parent, as this syncer runs them.
	// The pod's figures are then its containers' together.
	Sandbox *runtimeapi.PodSandboxStats
	// Containers are the stats of the pod's running containers, each with
	// its name (the spec's) and creation time (the kubelet's start time
	// of a CRI container), ordered by name.
	Containers []ContainerStats
}

// ContainerStats is the runtime's measure of one container.
type ContainerStats struct {
	// Name is the container's name in the pod spec.
	Name string
	// CreatedAt is when the runtime created the container (nanoseconds
	// since the epoch).
	CreatedAt int64
	// Stats is what the runtime measured (CPU, memory, writable layer).
	Stats *runtimeapi.ContainerStats
}

// PodStats measures the running pods this package created (a ready
// sandbox labelled LabelManaged), through Options.Stats: one entry per
// pod, ordered by namespace and name. It fails when Options.Stats is not
// set. Safe for concurrent use; each call asks the runtime afresh.
func (s *Syncer) PodStats(ctx context.Context) ([]PodStats, error) {
	if s.opts.Stats == nil {
		return nil, errors.New("cri: PodStats needs Options.Stats")
	}
	sandboxes, containers, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	managed := map[string]string{LabelManaged: "true"}
	cstats, err := s.opts.Stats.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: managed})
	if err != nil {
		return nil, fmt.Errorf("cri: listing the containers' stats: %w", err)
	}
	sbstats, err := s.opts.Stats.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{LabelSelector: managed})
	if err != nil {
		// Pod-level figures are then the containers' together.
		logr.FromContextOrDiscard(ctx).V(4).Info("The runtime gives no sandbox stats", "unimplemented", grpcstatus.Code(err) == codes.Unimplemented, "error", err.Error())
		sbstats = nil
	}

	statsByContainer := make(map[string]*runtimeapi.ContainerStats, len(cstats))
	for _, c := range cstats {
		statsByContainer[c.GetAttributes().GetId()] = c
	}
	statsBySandbox := make(map[string]*runtimeapi.PodSandboxStats, len(sbstats))
	for _, sb := range sbstats {
		statsBySandbox[sb.GetAttributes().GetId()] = sb
	}
	bySandbox := make(map[string]*PodStats, len(sandboxes))
	out := make([]PodStats, 0, len(sandboxes))
	for _, sb := range sandboxes {
		l := sb.GetLabels()
		out = append(out, PodStats{
			UID: types.UID(l[LabelPodUID]), Namespace: l[LabelPodNamespace], Name: l[LabelPodName],
			SandboxCreatedAt: sb.GetCreatedAt(), Sandbox: statsBySandbox[sb.GetId()],
		})
	}
	for i, sb := range sandboxes {
		bySandbox[sb.GetId()] = &out[i]
	}
	for _, c := range containers {
		p, ok := bySandbox[c.GetPodSandboxId()]
		st, measured := statsByContainer[c.GetId()]
		if !ok || !measured {
			continue
		}
		p.Containers = append(p.Containers, ContainerStats{Name: c.GetLabels()[LabelContainerName], CreatedAt: c.GetCreatedAt(), Stats: st})
	}
	for i := range out {
		slices.SortFunc(out[i].Containers, func(a, b ContainerStats) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(out, func(a, b PodStats) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// RunningPods returns the pods this package created that run now (a
// ready sandbox), as the kubelet's /runningpods shows them: each a
// v1.Pod with only its name, namespace and UID, and its running
// containers with their names and images. Safe for concurrent use.
func (s *Syncer) RunningPods(ctx context.Context) ([]*v1.Pod, error) {
	sandboxes, containers, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	bySandbox := make(map[string]*v1.Pod, len(sandboxes))
	out := make([]*v1.Pod, 0, len(sandboxes))
	for _, sb := range sandboxes {
		l := sb.GetLabels()
		p := &v1.Pod{}
		p.Name, p.Namespace, p.UID = l[LabelPodName], l[LabelPodNamespace], types.UID(l[LabelPodUID])
		bySandbox[sb.GetId()] = p
		out = append(out, p)
	}
	for _, c := range containers {
		if p, ok := bySandbox[c.GetPodSandboxId()]; ok {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c.GetLabels()[LabelContainerName], Image: c.GetImage().GetImage()})
		}
	}
	for _, p := range out {
		slices.SortFunc(p.Spec.Containers, func(a, b v1.Container) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out, nil
}

// running lists the ready sandboxes and the running containers this
// package created.
func (s *Syncer) running(ctx context.Context) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	managed := map[string]string{LabelManaged: "true"}
	sandboxes, err := s.sandboxes.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: managed,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cri: listing the ready sandboxes: %w", err)
	}
	containers, err := s.containers.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: managed,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cri: listing the running containers: %w", err)
	}
	return sandboxes, containers, nil
}
