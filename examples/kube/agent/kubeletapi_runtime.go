package agent

import (
	"context"
	"errors"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/podkit/podkit/examples/kube/hollowruntime"
	"github.com/podkit/podkit/examples/kube/kubeletserver"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// This file adapts the runtime to what the kubelet API serves of a
// runtime: exec, attach and port-forward sessions (kubectl exec, cp,
// attach, debug -it, port-forward), its pods' stats (/stats/summary,
// /metrics/resource, kubectl top) and the pods it runs (/runningpods).

// runtimeStreamer serves the sessions with the runtime. A hollow
// container's sessions fail with hollowruntime.ErrNoProcesses, which the
// client gets as "not supported" (501) with that message.
func runtimeStreamer(rt kubeletRuntime) kubeletserver.Streamer {
	return kubeletserver.StreamerFuncs{
		ExecFunc: func(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions, s kubeletserver.Streams) (int, error) {
			code, err := rt.Exec(ctx, pod.UID, opts.Container, opts.Command, runtimeStreams(ctx, s))
			return code, sessionError(err)
		},
		AttachFunc: func(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions, s kubeletserver.Streams) error {
			return sessionError(rt.Attach(ctx, pod.UID, opts.Container, runtimeStreams(ctx, s)))
		},
		PortForwardFunc: func(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
			return sessionError(rt.PortForward(ctx, pod.UID, port, stream))
		},
	}
}

// sessionError marks an error of a runtime that has no process to reach
// (hollowruntime.ErrNoProcesses) as kubeletserver.ErrNotSupported; any
// other error is returned as it is.
func sessionError(err error) error {
	if errors.Is(err, hollowruntime.ErrNoProcesses) {
		return errors.Join(kubeletserver.ErrNotSupported, err)
	}
	return err
}

// runtimeStreams converts a session's streams; the terminal sizes are
// passed on by a goroutine that ends when the server closes its channel
// or ctx ends (the session's).
func runtimeStreams(ctx context.Context, s kubeletserver.Streams) processruntime.Streams {
	out := processruntime.Streams{Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, TTY: s.TTY}
	if s.Resize == nil {
		return out
	}
	sizes := make(chan processruntime.TerminalSize)
	out.Resize = sizes
	go func() {
		defer close(sizes)
		for {
			select {
			case size, ok := <-s.Resize:
				if !ok {
					return
				}
				select {
				case sizes <- processruntime.TerminalSize{Width: size.Width, Height: size.Height}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// runtimeStats measures the runtime's pods for the Summary API.
func runtimeStats(rt kubeletRuntime) kubeletserver.StatsProvider {
	return kubeletserver.StatsProviderFunc(func(ctx context.Context) ([]statsapi.PodStats, error) {
		pods, err := rt.PodStats(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]statsapi.PodStats, 0, len(pods))
		for _, p := range pods {
			ps := statsapi.PodStats{
				PodRef:    statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
				StartTime: metav1.NewTime(p.StartTime),
				CPU:       summaryCPU(p.CPU),
				Memory:    summaryMemory(p.Memory),
				Network:   summaryNetwork(p.Network),
			}
			for _, c := range p.Containers {
				ps.Containers = append(ps.Containers, statsapi.ContainerStats{
					Name: c.Name, StartTime: metav1.NewTime(c.StartTime),
					CPU: summaryCPU(c.CPU), Memory: summaryMemory(c.Memory),
				})
			}
			out = append(out, ps)
		}
		return out, nil
	})
}

func summaryCPU(c *processruntime.CPUStats) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	return &statsapi.CPUStats{Time: metav1.NewTime(c.Time), UsageCoreNanoSeconds: new(c.UsageCoreNanoSeconds)}
}

func summaryMemory(m *processruntime.MemoryStats) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{Time: metav1.NewTime(m.Time), WorkingSetBytes: new(m.WorkingSetBytes), UsageBytes: m.UsageBytes}
}

// summaryNetwork reports the pod's interfaces, eth0 (the pod network's)
// as the default one, as the kubelet does.
func summaryNetwork(n *processruntime.NetworkStats) *statsapi.NetworkStats {
	if n == nil {
		return nil
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(n.Time)}
	for _, i := range n.Interfaces {
		is := statsapi.InterfaceStats{Name: i.Name, RxBytes: new(i.RxBytes), RxErrors: new(i.RxErrors), TxBytes: new(i.TxBytes), TxErrors: new(i.TxErrors)}
		out.Interfaces = append(out.Interfaces, is)
		if i.Name == "eth0" {
			out.InterfaceStats = is
		}
	}
	return out
}

// runtimeRunningPods lists, for /runningpods, the pods of which a
// process runs, as the runtime knows them, less those the engine's window
// says can have none running any more: v1 pods with their identity and
// running containers only, as the kubelet answers.
func runtimeRunningPods(rt kubeletRuntime, couldRun func(types.UID) bool) func(context.Context) ([]*v1.Pod, error) {
	return func(context.Context) ([]*v1.Pod, error) {
		var out []*v1.Pod
		for _, rp := range rt.RunningPods() {
			if !couldRun(rp.UID) {
				continue
			}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
			for _, c := range rp.Containers {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
			}
			out = append(out, pod)
		}
		return out, nil
	}
}
