package cri

import (
	"context"
	"fmt"
	"net/url"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetExec asks the runtime (CRI Exec) for the URL of its streaming server
// that runs opts.Command in the running instance of container
// opts.Container of pod, with the streams opts asks for. The kubelet API
// proxies the client to that URL (kubeletserver.StreamLocator); the URL
// serves one session, and only for a short while. A container that does
// not run is a gRPC NotFound error; the runtime's refusals are returned
// as they are (gRPC status errors). Safe for concurrent use.
func (s *Syncer) GetExec(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions) (*url.URL, error) {
	id, err := s.runningContainer(ctx, pod, opts.Container)
	if err != nil {
		return nil, err
	}
	resp, err := s.containers.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: opts.Command,
		Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr && !opts.TTY,
	})
	if err != nil {
		return nil, fmt.Errorf("cri: exec in container %q of pod %s: %w", opts.Container, podRef(pod), err)
	}
	return streamingURL(resp.GetUrl(), "exec", pod, opts.Container)
}

// GetAttach asks the runtime (CRI Attach) for the URL that attaches to the
// running instance of container opts.Container of pod, as GetExec does.
func (s *Syncer) GetAttach(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions) (*url.URL, error) {
	id, err := s.runningContainer(ctx, pod, opts.Container)
	if err != nil {
		return nil, err
	}
	resp, err := s.containers.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: id, Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr && !opts.TTY,
	})
	if err != nil {
		return nil, fmt.Errorf("cri: attach to container %q of pod %s: %w", opts.Container, podRef(pod), err)
	}
	return streamingURL(resp.GetUrl(), "attach", pod, opts.Container)
}

// GetPortForward asks the runtime (CRI PortForward) for the URL that
// forwards opts.Ports (or the ports the client names) of pod's ready
// sandbox, into the pod's network namespace. A pod without a ready
// sandbox is a gRPC NotFound error.
func (s *Syncer) GetPortForward(ctx context.Context, pod *v1.Pod, opts *v1.PodPortForwardOptions) (*url.URL, error) {
	ready, err := s.sandboxes.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: sandboxFilter(pod.UID).LabelSelector,
	})
	if err != nil {
		return nil, fmt.Errorf("cri: listing the ready sandboxes of pod %s: %w", podRef(pod), err)
	}
	if len(ready) == 0 {
		return nil, grpcstatus.Errorf(codes.NotFound, "cri: pod %s has no ready sandbox", podRef(pod))
	}
	newest := ready[0]
	for _, sb := range ready[1:] {
		if sb.GetCreatedAt() > newest.GetCreatedAt() {
			newest = sb
		}
	}
	resp, err := s.sandboxes.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: newest.GetId(), Port: opts.Ports})
	if err != nil {
		return nil, fmt.Errorf("cri: port-forward to pod %s: %w", podRef(pod), err)
	}
	return streamingURL(resp.GetUrl(), "port-forward", pod, "")
}

// runningContainer returns the ID of the running instance of container
// name of pod (the newest, should there be several).
func (s *Syncer) runningContainer(ctx context.Context, pod *v1.Pod, name string) (string, error) {
	filter := containerFilter(pod.UID)
	filter.LabelSelector[LabelContainerName] = name
	filter.State = &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	running, err := s.containers.ListContainers(ctx, filter)
	if err != nil {
		return "", fmt.Errorf("cri: listing the running containers %q of pod %s: %w", name, podRef(pod), err)
	}
	if len(running) == 0 {
		return "", grpcstatus.Errorf(codes.NotFound, "cri: container %q of pod %s is not running", name, podRef(pod))
	}
	newest := running[0]
	for _, c := range running[1:] {
		if c.GetCreatedAt() > newest.GetCreatedAt() {
			newest = c
		}
	}
	return newest.GetId(), nil
}

// streamingURL parses the URL a runtime returned.
func streamingURL(raw, what string, pod *v1.Pod, container string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil && !u.IsAbs() {
		err = fmt.Errorf("not an absolute URL")
	}
	if err != nil {
		return nil, fmt.Errorf("cri: the runtime's %s URL %q for pod %s (container %q): %w", what, raw, podRef(pod), container, err)
	}
	return u, nil
}
