package hollowruntime

import (
	"context"
	"io"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// This file is what the kubelet API serves of a runtime (the process
// runtime's method set): a hollow container has no process, so sessions
// and logs fail with ErrNoProcesses, stats report no usage, and the
// running pods are those with a running hollow container.

// ReadLogs fails with ErrNoProcesses: a hollow container writes no logs.
func (r *Runtime) ReadLogs(context.Context, types.UID, string, processruntime.LogOptions, io.Writer) error {
	return ErrNoProcesses
}

// Exec fails with ErrNoProcesses.
func (r *Runtime) Exec(context.Context, types.UID, string, []string, processruntime.Streams) (int, error) {
	return 0, ErrNoProcesses
}

// Attach fails with ErrNoProcesses.
func (r *Runtime) Attach(context.Context, types.UID, string, processruntime.Streams) error {
	return ErrNoProcesses
}

// PortForward closes stream and fails with ErrNoProcesses: the stream is
// the runtime's to close once called, as the process runtime's is.
func (r *Runtime) PortForward(_ context.Context, _ types.UID, _ int32, stream io.ReadWriteCloser) error {
	stream.Close()
	return ErrNoProcesses
}

// PodStats reports no pods: hollow containers use nothing.
func (r *Runtime) PodStats(context.Context) ([]processruntime.PodStats, error) { return nil, nil }

// RunningPods lists the pods with a running hollow container, each with
// its running containers in name order.
func (r *Runtime) RunningPods() []processruntime.RunningPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []processruntime.RunningPod
	for _, p := range r.pods {
		rp := processruntime.RunningPod{UID: p.uid, Namespace: p.namespace, Name: p.name}
		for _, c := range p.containers {
			if c.state == processruntime.ContainerStateRunning {
				rp.Containers = append(rp.Containers, processruntime.RunningContainer{Name: c.name, Image: c.image, ID: c.id})
			}
		}
		if len(rp.Containers) > 0 {
			sort.Slice(rp.Containers, func(i, j int) bool { return rp.Containers[i].Name < rp.Containers[j].Name })
			out = append(out, rp)
		}
	}
	return out
}
