package processruntime_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// procProbe reports a pod's running containers from the process table:
// the group leaders carrying the pod's UID in their environment.
var procProbe = podworkertest.ProbeFunc(func(_ context.Context, uid types.UID) (map[string]string, error) {
	found, err := processruntime.ScanProcesses(func(u string) bool { return u == string(uid) })
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range found {
		if !p.Leader {
			continue
		}
		if p.Container == "stubborn" && !termIgnored(p.PID) {
			// The suite's SIGTERM-ignoring container counts as running only
			// once its shell has run the trap; before that a SIGTERM would
			// still end it, and the grace-period checks would be racing it.
			continue
		}
		out[p.Container] = strconv.Itoa(p.PID) + "." + strconv.FormatUint(p.StartTicks, 10)
	}
	return out, nil
})

var conformanceContainers = podworkertest.ConformanceContainers{
	LongRunning: v1.Container{Command: []string{"sleep", "3600"}},
	IgnoresTerm: v1.Container{Command: []string{"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}},
	Succeeds:    v1.Container{Command: []string{"true"}},
}

func TestConformance(t *testing.T) {
	podworkertest.RunConformance(t, func(t *testing.T) podworkertest.ConformanceTarget[processruntime.PodStatus] {
		rt := openRuntime(t, processruntime.Options{})
		return podworkertest.ConformanceTarget[processruntime.PodStatus]{
			Syncer:     rt,
			Status:     rt,
			Probe:      procProbe,
			Containers: conformanceContainers,
			Tolerance:  3 * time.Second,
			Parallel:   true,
		}
	})
}
