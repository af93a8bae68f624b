package cri_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// Commands the simulated runtime gives a behaviour to. cri-api's fake runs
// nothing: its containers run from StartContainer until StopContainer.
var (
	cmdSucceeds    = []string{"true"}
	cmdIgnoresTerm = []string{"ignore-term"}
)

// simulatedRuntime is cri-api's FakeRuntimeService with the behaviours the
// conformance suite needs: a container of cmdSucceeds exits with 0 as soon
// as it starts, and one of cmdIgnoresTerm is stopped only when its stop
// timeout has passed (it is then killed, exit code 137), as a runtime does
// with a process that ignores SIGTERM.
type simulatedRuntime struct {
	*fakeapi.FakeRuntimeService
	mu       sync.Mutex
	commands map[string][]string
}

func newSimulatedRuntime() *simulatedRuntime {
	return &simulatedRuntime{FakeRuntimeService: fakeapi.NewFakeRuntimeService(), commands: map[string][]string{}}
}

func (r *simulatedRuntime) command(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commands[id]
}

func (r *simulatedRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := r.FakeRuntimeService.CreateContainer(ctx, sandboxID, config, sandboxConfig)
	if err == nil {
		r.mu.Lock()
		r.commands[id] = config.GetCommand()
		r.mu.Unlock()
	}
	return id, err
}

func (r *simulatedRuntime) StartContainer(ctx context.Context, id string) error {
	if err := r.FakeRuntimeService.StartContainer(ctx, id); err != nil {
		return err
	}
	if slices.Equal(r.command(id), cmdSucceeds) {
		r.setExited(id, 0)
	}
	return nil
}

func (r *simulatedRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	if !slices.Equal(r.command(id), cmdIgnoresTerm) || !r.isRunning(id) {
		return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
	}
	if timeout > 0 {
		grace := time.NewTimer(time.Duration(timeout) * time.Second)
		defer grace.Stop()
		select {
		case <-grace.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := r.FakeRuntimeService.StopContainer(ctx, id, timeout); err != nil {
		return err
	}
	r.setExited(id, 137)
	return nil
}

func (r *simulatedRuntime) isRunning(id string) bool {
	r.Lock()
	defer r.Unlock()
	c, ok := r.Containers[id]
	return ok && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
}

func (r *simulatedRuntime) setExited(id string, code int32) {
	r.Lock()
	defer r.Unlock()
	if c, ok := r.Containers[id]; ok {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode = code
		c.FinishedAt = time.Now().UnixNano()
	}
}

// criProbe tells which containers of a pod run, from the runtime's
// container list: a container's instance is its ID and creation time (the
// fake reuses IDs across a UID's lives).
func criProbe(containers criapi.ContainerManager) podworkertest.Probe {
	return podworkertest.ProbeFunc(func(ctx context.Context, uid types.UID) (map[string]string, error) {
		list, err := containers.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{cri.LabelPodUID: string(uid)},
		})
		if err != nil {
			return nil, err
		}
		out := make(map[string]string, len(list))
		for _, c := range list {
			out[c.GetLabels()[cri.LabelContainerName]] = fmt.Sprintf("%s@%d", c.GetId(), c.GetCreatedAt())
		}
		return out, nil
	})
}

func TestConformanceFake(t *testing.T) {
	podworkertest.RunConformance(t, func(t *testing.T) podworkertest.ConformanceTarget[*cri.PodStatus] {
		rt := newSimulatedRuntime()
		images := fakeapi.NewFakeImageService()
		images.SetFakeImages([]string{testImage})
		s, err := cri.New(rt, rt, cri.Options{Images: images})
		require.NoError(t, err)
		t.Cleanup(func() {
			rt.Lock()
			defer rt.Unlock()
			require.Empty(t, rt.Sandboxes, "the suite cleans up every pod")
			require.Empty(t, rt.Containers)
		})
		return podworkertest.ConformanceTarget[*cri.PodStatus]{
			Syncer: s,
			Status: s,
			Probe:  criProbe(rt),
			Containers: podworkertest.ConformanceContainers{
				LongRunning: v1.Container{Image: testImage, Command: []string{"sleep", "3600"}},
				IgnoresTerm: v1.Container{Image: testImage, Command: cmdIgnoresTerm},
				Succeeds:    v1.Container{Image: testImage, Command: cmdSucceeds},
			},
			Parallel: true,
		}
	})
}
