package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// maxMsgSize is the largest CRI response the client accepts (the
// kubelet's limit): listing many containers exceeds gRPC's default 4 MiB.
const maxMsgSize = 16 << 20

// Client speaks the CRI v1 gRPC API to a runtime (containerd, CRI-O) over a
// unix socket. It serves the roles the Syncer needs
// (criapi.PodSandboxManager, criapi.ContainerManager, ImageStatusReader)
// and Version. Each method is one RPC: it returns the runtime's error as is
// (a gRPC status error) and honours ctx. Safe for concurrent use.
type Client struct {
	conn    *grpc.ClientConn
	runtime runtimeapi.RuntimeServiceClient
	images  runtimeapi.ImageServiceClient
}

var (
	_ criapi.PodSandboxManager = (*Client)(nil)
	_ criapi.ContainerManager  = (*Client)(nil)
	_ ImageStatusReader        = (*Client)(nil)
	_ StatsLister              = (*Client)(nil)
)

// Dial returns a Client for the CRI endpoint, "unix:///path/to/socket" or
// a plain socket path. It does not connect: the first call does (call
// Version to check the runtime answers). Close it when done.
func Dial(endpoint string) (*Client, error) {
	target := endpoint
	switch {
	case strings.HasPrefix(endpoint, "/"):
		target = "unix://" + endpoint
	case !strings.HasPrefix(endpoint, "unix://"):
		return nil, fmt.Errorf("cri: endpoint %q is not a unix socket (want unix:///path or /path)", endpoint)
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("cri: connecting to %s: %w", endpoint, err)
	}
	return &Client{conn: conn, runtime: runtimeapi.NewRuntimeServiceClient(conn), images: runtimeapi.NewImageServiceClient(conn)}, nil
}

// Close closes the connection. Calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// Version returns the runtime's name and versions.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return c.runtime.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
}

// RunPodSandbox creates and starts a pod sandbox and returns its ID.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	resp, err := c.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", err
	}
	if resp.GetPodSandboxId() == "" {
		return "", errors.New("cri: the runtime ran a sandbox but returned no ID")
	}
	return resp.GetPodSandboxId(), nil
}

// StopPodSandbox stops a sandbox and everything in it.
func (c *Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	_, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// RemovePodSandbox removes a sandbox.
func (c *Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	_, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// PodSandboxStatus returns a sandbox's status.
func (c *Client) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
}

// ListPodSandbox lists the sandboxes that match filter (nil: all).
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetItems(), nil
}

// PortForward returns a streaming endpoint to forward a sandbox's ports.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return c.runtime.PortForward(ctx, req)
}

// UpdatePodSandboxResources updates a sandbox's pod-level resources.
func (c *Client) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return c.runtime.UpdatePodSandboxResources(ctx, req)
}

// CheckpointPod checkpoints a sandbox.
func (c *Client) CheckpointPod(ctx context.Context, options *runtimeapi.CheckpointPodRequest) error {
	_, err := c.runtime.CheckpointPod(ctx, options)
	return err
}

// RestorePod restores a sandbox from a checkpoint.
func (c *Client) RestorePod(ctx context.Context, options *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return c.runtime.RestorePod(ctx, options)
}

// CreateContainer creates a container in a sandbox and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", err
	}
	if resp.GetContainerId() == "" {
		return "", errors.New("cri: the runtime created a container but returned no ID")
	}
	return resp.GetContainerId(), nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, containerID string) error {
	_, err := c.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
	return err
}

// StopContainer stops a container: SIGTERM (or the image's stop signal),
// then SIGKILL after timeout seconds (0: at once). It returns once the
// container has exited.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	_, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
	return err
}

// RemoveContainer removes a container.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	_, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
	return err
}

// ListContainers lists the containers that match filter (nil: all).
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetContainers(), nil
}

// ContainerStatus returns a container's status.
func (c *Client) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
}

// UpdateContainerResources updates a container's resources.
func (c *Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	_, err := c.runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: containerID, Linux: resources.GetLinux(), Windows: resources.GetWindows(),
	})
	return err
}

// ExecSync runs cmd in a container and returns its output. A non-zero exit
// code is an error that implements k8s.io/utils/exec.ExitError. timeout 0
// means none; the runtime counts it in whole seconds, rounded up.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		// The runtime enforces timeout; the RPC gets a little longer.
		ctx, cancel = context.WithTimeout(ctx, timeout+5*time.Second)
		defer cancel()
	}
	seconds := int64((timeout + time.Second - 1) / time.Second) // the CRI counts whole seconds: round up
	resp, err := c.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: seconds})
	if err != nil {
		return nil, nil, err
	}
	if resp.GetExitCode() != 0 {
		err = utilexec.CodeExitError{
			Err:  fmt.Errorf("command %q in container %s exited with code %d: %s", cmd, containerID, resp.GetExitCode(), resp.GetStderr()),
			Code: int(resp.GetExitCode()),
		}
	}
	return resp.GetStdout(), resp.GetStderr(), err
}

// Exec returns a streaming endpoint to run a command in a container.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return c.runtime.Exec(ctx, req)
}

// Attach returns a streaming endpoint to attach to a running container.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return c.runtime.Attach(ctx, req)
}

// ReopenContainerLog asks the runtime to reopen a container's log file.
func (c *Client) ReopenContainerLog(ctx context.Context, containerID string) error {
	_, err := c.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID})
	return err
}

// CheckpointContainer checkpoints a container.
func (c *Client) CheckpointContainer(ctx context.Context, options *runtimeapi.CheckpointContainerRequest) error {
	_, err := c.runtime.CheckpointContainer(ctx, options)
	return err
}

// GetContainerEvents streams the runtime's container events into ch until
// ctx ends or the stream fails; connected, when not nil, is called once the
// stream is open. It returns nil when the runtime ends the stream.
func (c *Client) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	stream, err := c.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return err
	}
	if connected != nil {
		connected(stream)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ListContainerStats returns the stats of the containers filter selects.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	resp, err := c.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// ListPodSandboxStats returns the stats of the sandboxes filter selects;
// a runtime without it answers a gRPC Unimplemented error.
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	resp, err := c.runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// ImageStatus returns an image's status; its Image is nil when the image
// is not present.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
}
