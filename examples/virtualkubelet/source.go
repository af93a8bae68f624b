package virtualkubelet

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

// apiSource is the provider's config source: the pods virtual-kubelet has
// handed over (CreatePod, UpdatePod, DeletePod) whose API object still
// exists, sent as the API server's snapshots, at once and after every
// change. The sync loop turns them into the engine's updates, as the
// kubelet's sync loop does with its API server source.
type apiSource struct{ p *Provider }

// Source names the API server.
func (apiSource) Source() string { return mirror.ApiserverSource }

// Run sends a snapshot at once and after every change until ctx ends.
func (s apiSource) Run(ctx context.Context, sink podconfig.PodSink) error {
	for {
		if err := sink.SetPods(ctx, mirror.ApiserverSource, s.p.desired()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.p.changed:
		}
	}
}

// desired returns the pods the API server still has, as the provider was
// last told them, sorted by name (and UID). A pod whose API object is gone
// is not among them: it is stopped (goneLocked), then forgotten.
func (p *Provider) desired() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*v1.Pod, 0, len(p.entries))
	for _, e := range p.entries {
		if !e.gone {
			out = append(out, e.pod)
		}
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int {
		if c := strings.Compare(podKey(a), podKey(b)); c != 0 {
			return c
		}
		return strings.Compare(string(a.UID), string(b.UID))
	})
	return out
}

// changedLocked wakes the source. It never blocks.
func (p *Provider) changedLocked() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}
