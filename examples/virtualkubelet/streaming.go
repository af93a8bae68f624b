package virtualkubelet

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BackendStreams is an optional interface of a Backend: with it, the
// provider serves exec, attach and port-forward (kubectl exec, attach, cp,
// port-forward) through virtual-kubelet's own handlers (node/api, which
// speak the kubelet's streaming protocols); without it they fail.
//
// Each method is called from virtual-kubelet's HTTP handler goroutine of
// the request, for a pod the provider runs, and returns when the session
// ends; ctx ends when the client goes away. The streams of api.AttachIO
// are nil when the client did not ask for them; Resize is nil without a
// terminal.
type BackendStreams interface {
	// Exec runs cmd in the named container and copies between its standard
	// streams and attach's until it exits. A command that exits non-zero
	// returns an error implementing k8s.io/utils/exec.ExitError (such as
	// exec.CodeExitError), which the client reports as the exit code.
	Exec(ctx context.Context, uid types.UID, container string, cmd []string, attach api.AttachIO) error
	// Attach connects attach's streams to the named container's main
	// process (its standard input when the container has one, its output
	// from now on) until ctx ends, standard input ends, or the container
	// exits.
	Attach(ctx context.Context, uid types.UID, container string, attach api.AttachIO) error
	// PortForward connects stream to the pod's port and copies both ways
	// until either side closes.
	PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error
}

// BackendLogs is an optional interface of a Backend: with it,
// GetContainerLogs (kubectl logs) reads the backend's container logs;
// without it, it fails.
type BackendLogs interface {
	// Logs returns the log of the named container as opts ask. The
	// provider closes it.
	Logs(ctx context.Context, uid types.UID, container string, opts api.ContainerLogOpts) (io.ReadCloser, error)
}

// errNoStreams is the error of a streaming call when the backend cannot.
var errNoStreams = errors.New("virtualkubelet: the backend cannot exec, attach or port-forward (it does not implement BackendStreams)")

// runningContainer returns the UID of the pod that holds namespace/name
// while its containers may run, checking that it has the named container
// (empty: any). A pod that is not running here, or has no such container,
// is NotFound (errdefs), which virtual-kubelet's handlers answer with 404.
func (p *Provider) runningContainer(namespace, name, container string) (types.UID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid, e := p.holderLocked(namespace, name)
	if e == nil || !p.mayRunLocked(uid, e) {
		return "", errdefs.NotFoundf("virtualkubelet: pod %s/%s is not running here", namespace, name)
	}
	if container != "" && !slices.ContainsFunc(e.pod.Spec.Containers, func(c v1.Container) bool { return c.Name == container }) {
		return "", errdefs.NotFoundf("virtualkubelet: pod %s/%s has no container %q", namespace, name, container)
	}
	return uid, nil
}

// RunInContainer runs cmd in a container of a running pod through the
// backend (BackendStreams.Exec), for virtual-kubelet's exec handler
// (api.ContainerExecHandlerFunc). The backend's error is returned as it is,
// so that an exit code reaches the client.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	uid, err := p.runningContainer(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if p.streams == nil {
		return errNoStreams
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("virtualkubelet: exec: no command")
	}
	return p.streams.Exec(ctx, uid, containerName, cmd, attach)
}

// AttachToContainer attaches to a container of a running pod through the
// backend (BackendStreams.Attach), for virtual-kubelet's attach handler
// (api.ContainerAttachHandlerFunc).
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	uid, err := p.runningContainer(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if p.streams == nil {
		return errNoStreams
	}
	return p.streams.Attach(ctx, uid, containerName, attach)
}

// PortForward connects stream to a port of a running pod through the
// backend (BackendStreams.PortForward), for virtual-kubelet's port-forward
// handler (api.PortForwardHandlerFunc). A port outside 1-65535 is
// InvalidInput (errdefs).
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	uid, err := p.runningContainer(namespace, podName, "")
	if err != nil {
		return err
	}
	if p.streams == nil {
		return errNoStreams
	}
	if port < 1 || port > 65535 {
		return errdefs.InvalidInputf("virtualkubelet: port-forward: port %d is out of range", port)
	}
	return p.streams.PortForward(ctx, uid, port, stream)
}

// GetContainerLogs returns the log of a container of a pod the provider
// knows (GetPod answers for it), through the backend (BackendLogs), for
// virtual-kubelet's logs handler (api.ContainerLogsHandlerFunc).
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p.mu.Lock()
	uid, e := p.holderLocked(namespace, podName)
	var known bool
	if e != nil {
		known = slices.ContainsFunc(e.pod.Spec.Containers, func(c v1.Container) bool { return c.Name == containerName })
	}
	p.mu.Unlock()
	switch {
	case e == nil:
		return nil, errdefs.NotFoundf("virtualkubelet: pod %s/%s is not known here", namespace, podName)
	case !known:
		return nil, errdefs.NotFoundf("virtualkubelet: pod %s/%s has no container %q", namespace, podName, containerName)
	}
	logs, ok := p.backend.(BackendLogs)
	if !ok {
		return nil, errors.New("virtualkubelet: the backend keeps no logs (it does not implement BackendLogs)")
	}
	rc, err := logs.Logs(ctx, uid, containerName, opts)
	if errors.Is(err, ErrNotFound) {
		return nil, errdefs.AsNotFound(err)
	}
	return rc, err
}
