package virtualkubelet

import (
	"cmp"
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

// snapshotPacing bounds what the snapshots cost: after one that took d
// (building it, and the sync loop taking its updates), the next waits
// until snapshotPacing*d has passed, so the source spends at most a fifth
// of its time on them. Every snapshot holds every pod, so at thousands of
// pods, with a change for each CreatePod, unpaced snapshots would keep a
// core busy copying pods (quadratic work in the pod count); paced, the
// changes of the wait go out together, one snapshot later. A snapshot of
// a few pods takes microseconds, and so does its wait.
const snapshotPacing = 4

// Run sends a snapshot at once and after every change until ctx ends,
// paced by snapshotPacing.
func (s apiSource) Run(ctx context.Context, sink podconfig.PodSink) error {
	clk := s.p.opts.Clock
	for {
		// The snapshot holds every change signalled so far, those of the
		// wait included: their signal is spent.
		select {
		case <-s.p.changed:
		default:
		}
		began := clk.Now()
		if err := sink.SetPods(ctx, mirror.ApiserverSource, s.p.desired()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		end := clk.Now()
		next := end.Add(snapshotPacing * end.Sub(began))
		select {
		case <-ctx.Done():
			return nil
		case <-s.p.changed:
		}
		if wait := next.Sub(clk.Now()); wait > 0 {
			t := clk.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
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
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name),
			strings.Compare(string(a.UID), string(b.UID)))
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
