package cri_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/examples/cri"
)

// urlRuntime is the fake runtime with a streaming server: its Exec,
// Attach and PortForward record the request and answer a URL.
type urlRuntime struct {
	*fakeRuntime
	mu   sync.Mutex
	reqs []any
}

func (u *urlRuntime) record(req any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reqs = append(u.reqs, req)
}

func (u *urlRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	u.record(req)
	return &runtimeapi.ExecResponse{Url: "http://127.0.0.1:10010/exec/token1"}, nil
}

func (u *urlRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	u.record(req)
	return &runtimeapi.AttachResponse{Url: "http://127.0.0.1:10010/attach/token2"}, nil
}

func (u *urlRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	u.record(req)
	return &runtimeapi.PortForwardResponse{Url: "relative/token3"}, nil
}

func TestStreamingURLs(t *testing.T) {
	e := newEnv(t)
	pod := newPod("web")
	e.mustSync(t, pod)
	rt := &urlRuntime{fakeRuntime: e.rt}
	s, err := cri.New(rt, rt, cri.Options{Images: e.images})
	require.NoError(t, err)
	ctx := context.Background()
	id := e.container(t, pod.UID, "app").GetId()

	u, err := s.GetExec(ctx, pod, &v1.PodExecOptions{Container: "app", Command: []string{"sh", "-c", "id"}, Stdin: true, Stdout: true, Stderr: true, TTY: true})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:10010/exec/token1", u.String())
	u, err = s.GetAttach(ctx, pod, &v1.PodAttachOptions{Container: "app", Stdout: true, Stderr: true})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:10010/attach/token2", u.String())
	_, err = s.GetPortForward(ctx, pod, &v1.PodPortForwardOptions{Ports: []int32{80, 443}})
	assert.ErrorContains(t, err, `the runtime's port-forward URL "relative/token3" for pod ns/web (web-uid)`, "a URL that cannot be proxied to")
	sandbox := e.status(t, pod.UID).ReadySandbox().GetId()
	assert.Equal(t, []any{
		&runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh", "-c", "id"}, Tty: true, Stdin: true, Stdout: true},
		&runtimeapi.AttachRequest{ContainerId: id, Stdout: true, Stderr: true},
		&runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: []int32{80, 443}},
	}, rt.reqs, "the running container and ready sandbox; no stderr with a TTY")

	_, err = s.GetExec(ctx, pod, &v1.PodExecOptions{Container: "nosuch", Command: []string{"true"}, Stdout: true})
	assert.Equal(t, codes.NotFound, grpcstatus.Code(err), "%v", err)
	e.exit(t, pod.UID, "app", 0, 0)
	_, err = s.GetAttach(ctx, pod, &v1.PodAttachOptions{Container: "app", Stdout: true})
	assert.Equal(t, codes.NotFound, grpcstatus.Code(err), "an exited container: %v", err)
	_, err = s.GetPortForward(ctx, newPod("other"), &v1.PodPortForwardOptions{})
	assert.Equal(t, codes.NotFound, grpcstatus.Code(err), "no sandbox: %v", err)
}

func TestRunningPodsAndStats(t *testing.T) {
	e := newEnv(t)
	web, db := newPod("web"), newPod("db")
	e.mustSync(t, web)
	e.mustSync(t, db)
	ctx := context.Background()

	running, err := e.syncer.RunningPods(ctx)
	require.NoError(t, err)
	require.Len(t, running, 2)
	assert.Equal(t, []string{"db", "web"}, []string{running[0].Name, running[1].Name})
	assert.Equal(t, web.UID, running[1].UID)
	assert.Equal(t, []v1.Container{{Name: "app", Image: testImage}}, running[1].Spec.Containers)

	_, err = e.syncer.PodStats(ctx)
	assert.ErrorContains(t, err, "cri: PodStats needs Options.Stats")

	s, err := cri.New(e.rt, e.rt, cri.Options{Stats: e.rt})
	require.NoError(t, err)
	webID := e.container(t, web.UID, "app").GetId()
	e.rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: webID},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: 5, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 7}},
	}})
	stats, err := s.PodStats(ctx)
	require.NoError(t, err)
	require.Len(t, stats, 2)
	assert.Equal(t, "db", stats[0].Name)
	assert.Empty(t, stats[0].Containers, "a container the runtime did not measure is left out")
	assert.Equal(t, "web", stats[1].Name)
	require.Len(t, stats[1].Containers, 1)
	assert.Equal(t, "app", stats[1].Containers[0].Name)
	assert.Equal(t, uint64(7), stats[1].Containers[0].Stats.GetCpu().GetUsageCoreNanoSeconds().GetValue())

	e.exit(t, web.UID, "app", 0, 0)
	stats, err = s.PodStats(ctx)
	require.NoError(t, err)
	assert.Empty(t, stats[1].Containers, "only running containers are measured")
}
