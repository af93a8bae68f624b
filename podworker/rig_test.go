package podworker_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The rig the engine's scenario tests run on, and the pods they use.
// Every test runs in a testing/synctest bubble: synctest.Wait is the
// "drain the workers" step, and time only moves when a test sleeps.

// rig is one engine with a FakeSyncer, inside a synctest bubble.
type rig struct {
	t    *testing.T
	ctx  context.Context
	f    *podworkertest.FakeSyncer[struct{}]
	w    *podworker.PodWorkers[struct{}]
	stop func()
}

// newRig makes an engine that is not running yet. Resyncs are off unless
// opts asks for them, so traces only show what a test caused.
func newRig(t *testing.T, opts podworker.Options[struct{}]) *rig {
	t.Helper()
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = -1
	}
	f := podworkertest.NewFakeSyncer[struct{}]()
	w, err := podworker.New[struct{}](f, opts)
	require.NoError(t, err)
	return &rig{t: t, ctx: context.Background(), f: f, w: w}
}

// startRig is newRig plus Run.
func startRig(t *testing.T, opts podworker.Options[struct{}]) *rig {
	r := newRig(t, opts)
	r.start()
	return r
}

func (r *rig) start() { r.stop = podworkertest.Start(r.t, r.w) }

func (r *rig) send(o podworker.UpdatePodOptions) {
	r.t.Helper()
	require.NoError(r.t, r.w.UpdatePod(r.ctx, o))
}

func (r *rig) update(ut podworker.UpdateType, pod *v1.Pod) {
	r.t.Helper()
	r.send(podworker.UpdatePodOptions{UpdateType: ut, Pod: pod})
}

func (r *rig) kill(pod *v1.Pod, ko *podworker.KillPodOptions) {
	r.t.Helper()
	r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: pod, KillPodOptions: ko})
}

// settle waits until every goroutine of the bubble is blocked: the engine
// has done all it can do without time passing.
func (r *rig) settle() { synctest.Wait() }

// coolDown lets a second pass on the bubble's clock with nothing to do,
// then settles: the warm workers that parked when the work ran out have
// exited by then (they park for a second at most).
func (r *rig) coolDown() {
	time.Sleep(time.Second)
	synctest.Wait()
}

// maxParked is how many warm workers the engine keeps parked at most:
// one per GOMAXPROCS, never more than MaxConcurrentSyncs when set.
func maxParked(maxConcurrent int) int {
	n := runtime.GOMAXPROCS(0)
	if maxConcurrent > 0 {
		n = min(n, maxConcurrent)
	}
	return n
}

// stalled lets the engine's stall checks see n held hooks as blocked:
// it sleeps stall periods on the bubble's clock, settling after each,
// for as many as the workers need to grow by one per CPU each period to n
// (two periods to find a hook blocked, then one per round), so that every
// ready pod behind them has a worker.
func (r *rig) stalled(n int) {
	per := maxParked(0)
	for range 2 + (n+per-1)/per {
		time.Sleep(podworker.StallPeriod)
		synctest.Wait()
	}
}

func (r *rig) info(uid types.UID) podworker.PodInfo {
	r.t.Helper()
	info, ok := r.w.Pod(uid)
	require.True(r.t, ok, "no worker for %s", uid)
	return info
}

func (r *rig) absent(uid types.UID) {
	r.t.Helper()
	_, ok := r.w.Pod(uid)
	require.False(r.t, ok, "worker for %s still exists", uid)
}

func (r *rig) hold(uid types.UID, h podworker.Hook) *podworkertest.Gate {
	return r.f.Hold(uid, h)
}

// entered settles and requires that g's hook is being held. It never
// blocks on the gate, so fake time cannot jump to a resync or retry.
func (r *rig) entered(g *podworkertest.Gate) {
	r.t.Helper()
	synctest.Wait()
	select {
	case <-g.Entered():
	default:
		r.t.Fatal("the held hook was not entered")
	}
}

func (r *rig) trace(uid types.UID) string { return r.f.Trace(uid) }

func mkPod(uid string) *v1.Pod { return podworkertest.NewPod(types.UID(uid), "ns", uid) }

func mkStatic(uid, name string) *v1.Pod {
	return podworkertest.NewStaticPod(types.UID(uid), "ns", name)
}

// deleted returns a copy of p with a deletion timestamp and grace.
func deleted(p *v1.Pod, grace *int64) *v1.Pod {
	p = p.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	p.DeletionGracePeriodSeconds = grace
	return p
}

// inPhase returns a copy of p in the given phase.
func inPhase(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = phase
	return p
}

func i64(v int64) *int64 { return &v }

func bubble(t *testing.T, f func(t *testing.T)) { synctest.Test(t, f) }
