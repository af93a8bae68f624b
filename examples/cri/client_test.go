package cri_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/podworker"
)

// runtimeServer serves cri-api's fake runtime over gRPC, for the methods
// the Syncer and these tests use.
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	f *fakeapi.FakeRuntimeService
}

func (s runtimeServer) Version(ctx context.Context, r *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return s.f.Version(ctx, r.GetVersion())
}
func (s runtimeServer) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := s.f.RunPodSandbox(ctx, r.GetConfig(), r.GetRuntimeHandler())
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, err
}
func (s runtimeServer) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, s.f.StopPodSandbox(ctx, r.GetPodSandboxId())
}
func (s runtimeServer) RemovePodSandbox(ctx context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, s.f.RemovePodSandbox(ctx, r.GetPodSandboxId())
}
func (s runtimeServer) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return s.f.PodSandboxStatus(ctx, r.GetPodSandboxId(), r.GetVerbose())
}
func (s runtimeServer) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.f.ListPodSandbox(ctx, r.GetFilter())
	return &runtimeapi.ListPodSandboxResponse{Items: items}, err
}
func (s runtimeServer) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := s.f.CreateContainer(ctx, r.GetPodSandboxId(), r.GetConfig(), r.GetSandboxConfig())
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, err
}
func (s runtimeServer) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return &runtimeapi.StartContainerResponse{}, s.f.StartContainer(ctx, r.GetContainerId())
}
func (s runtimeServer) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, s.f.StopContainer(ctx, r.GetContainerId(), r.GetTimeout())
}
func (s runtimeServer) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	return &runtimeapi.RemoveContainerResponse{}, s.f.RemoveContainer(ctx, r.GetContainerId())
}
func (s runtimeServer) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	cs, err := s.f.ListContainers(ctx, r.GetFilter())
	return &runtimeapi.ListContainersResponse{Containers: cs}, err
}
func (s runtimeServer) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return s.f.ContainerStatus(ctx, r.GetContainerId(), r.GetVerbose())
}
func (s runtimeServer) ExecSync(_ context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("bad"), ExitCode: 3}, nil
}

type imageServer struct {
	runtimeapi.UnimplementedImageServiceServer
	f *fakeapi.FakeImageService
}

func (s imageServer) ImageStatus(ctx context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return s.f.ImageStatus(ctx, r.GetImage(), r.GetVerbose())
}

// serveFake serves the fakes on a unix socket and returns a Client for it.
func serveFake(t *testing.T) (*cri.Client, *fakeapi.FakeRuntimeService) {
	t.Helper()
	rt := fakeapi.NewFakeRuntimeService()
	images := fakeapi.NewFakeImageService()
	images.SetFakeImages([]string{testImage})
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, runtimeServer{f: rt})
	runtimeapi.RegisterImageServiceServer(srv, imageServer{f: images})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	client, err := cri.Dial(sock) // a plain path works too
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, client.Close())
		srv.Stop()
		require.NoError(t, <-served)
	})
	return client, rt
}

func TestDialRejectsNonUnixEndpoints(t *testing.T) {
	_, err := cri.Dial("tcp://127.0.0.1:1234")
	assert.ErrorContains(t, err, "not a unix socket")
}

func TestClientServesTheSyncer(t *testing.T) {
	client, rt := serveFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := client.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, fakeapi.FakeRuntimeName, v.GetRuntimeName())

	s, err := cri.New(client, client, cri.Options{Images: client})
	require.NoError(t, err)
	pod := newPod("grpc")
	_, err = s.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, nil)
	require.NoError(t, err)
	st, err := s.PodStatus(ctx, pod.UID, time.Time{})
	require.NoError(t, err)
	require.Len(t, st.Containers, 1)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.Containers[0].GetState())
	assert.Equal(t, fakeapi.FakePodSandboxIPs, st.IPs())

	// A missing image is reported through the image service.
	missing := newPod("missing", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nope:1" })
	_, err = s.SyncPod(ctx, podworker.SyncPodCreate, missing, nil, nil)
	assert.ErrorIs(t, err, cri.ErrImageNotPresent)

	// ExecSync turns a non-zero exit code into an ExitError.
	stdout, stderr, err := client.ExecSync(ctx, st.Containers[0].GetId(), []string{"false"}, 1500*time.Millisecond)
	var exitErr utilexec.ExitError
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, 3, exitErr.ExitStatus())
	assert.Equal(t, "out", string(stdout))
	assert.Equal(t, "bad", string(stderr))

	require.NoError(t, s.SyncTerminatingPod(ctx, pod, nil, 1, nil))
	require.NoError(t, s.SyncTerminatingPod(ctx, missing, nil, 1, nil))
	// Something already gone (the runtime says NotFound) is not an error.
	// (The fake only pretends: the next call removes the container.)
	rt.InjectError("RemoveContainer", status.Error(codes.NotFound, "container is gone"))
	require.NoError(t, s.SyncTerminatedPod(ctx, pod, nil))
	require.NoError(t, s.SyncTerminatedPod(ctx, pod, nil))
	require.NoError(t, s.SyncTerminatedPod(ctx, missing, nil))
	pods, err := s.ListRuntimePods(ctx)
	require.NoError(t, err)
	assert.Empty(t, pods)

	// The runtime's errors come back as gRPC status errors.
	_, err = client.PodSandboxStatus(ctx, "no-such-sandbox", false)
	require.Error(t, err)
	_, err = client.ContainerStatus(ctx, "no-such-container", false)
	require.Error(t, err)
}
