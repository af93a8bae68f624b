package simcloud

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
)

var _ vk.BackendMetrics = (*Cloud)(nil)

// Default figures of a running container that asks for no resources.
const (
	DefaultNanoCores        = 1_000_000 // 1m
	DefaultMemoryWorkingSet = 8 << 20   // 8 MiB
)

// Usage is what a running container uses, as SetUsage sets it.
type Usage struct {
	// NanoCores is the CPU it uses, in billionths of a core.
	NanoCores uint64
	// MemoryWorkingSet is its memory working set, in bytes.
	MemoryWorkingSet uint64
}

// SetUsage sets what the named container of the pod uses from now on, in
// place of what its resource requests say. It is not an API call.
func (c *Cloud) SetUsage(uid types.UID, container string, u Usage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.pods[uid]
	if !ok {
		return c.notFound(uid)
	}
	if cp.usage == nil {
		cp.usage = map[string]Usage{}
	}
	cp.usage[container] = u
	return nil
}

// Usage returns the resource usage of every pod with a running container:
// per running container, what SetUsage set, or else its resource requests
// (CPU and memory; DefaultNanoCores and DefaultMemoryWorkingSet for what
// it does not request), and as CPU time that rate over the time since the
// container last started, on the cloud's clock.
func (c *Cloud) Usage(ctx context.Context) ([]vk.PodUsage, error) {
	var out []vk.PodUsage
	err := c.call(ctx, Call{Op: OpUsage}, func() error {
		now := c.clock.Now()
		for _, rp := range c.podsLocked() {
			cp := c.pods[rp.UID]
			pu := vk.PodUsage{UID: rp.UID, Time: now}
			for _, rc := range cp.remote.Containers {
				if rc.State != vk.ContainerRunning {
					continue
				}
				u, ok := cp.usage[rc.Name]
				if !ok {
					u = requested(cp, rc.Name)
				}
				elapsed := max(now.Sub(rc.StartedAt), 0)
				pu.Containers = append(pu.Containers, vk.ContainerUsage{
					Name:             rc.Name,
					CPU:              time.Duration(float64(u.NanoCores) * elapsed.Seconds()),
					NanoCores:        u.NanoCores,
					MemoryWorkingSet: u.MemoryWorkingSet,
				})
			}
			if len(pu.Containers) > 0 {
				out = append(out, pu)
			}
		}
		return nil
	})
	return out, err
}

// requested is the usage a container's resource requests describe.
func requested(cp *cloudPod, name string) Usage {
	u := Usage{NanoCores: DefaultNanoCores, MemoryWorkingSet: DefaultMemoryWorkingSet}
	spec := cp.container(name)
	if spec == nil {
		return u
	}
	if q, ok := spec.Resources.Requests["cpu"]; ok && q.MilliValue() > 0 {
		u.NanoCores = uint64(q.MilliValue()) * 1_000_000
	}
	if q, ok := spec.Resources.Requests["memory"]; ok && q.Value() > 0 {
		u.MemoryWorkingSet = uint64(q.Value())
	}
	return u
}
