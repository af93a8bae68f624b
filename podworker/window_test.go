package podworker_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// window is every answer of the window for one pod, in the order of the
// rows of SPEC §1.15.
type window struct {
	KnownTerminated       bool // IsPodKnownTerminated
	CouldHaveRunning      bool // CouldHaveRunningContainers
	ShouldBeFinished      bool // ShouldPodBeFinished
	TerminationRequested  bool // IsPodTerminationRequested
	ContainersTerminating bool // ShouldPodContainersBeTerminating
	RuntimeRemoved        bool // ShouldPodRuntimeBeRemoved
	ContentRemoved        bool // ShouldPodContentBeRemoved
	MirrorTerminating     bool // IsPodForMirrorPodTerminatingByFullName
}

func (r *rig) window(uid types.UID, fullName string) window {
	w := r.w
	return window{
		KnownTerminated:       w.IsPodKnownTerminated(uid),
		CouldHaveRunning:      w.CouldHaveRunningContainers(uid),
		ShouldBeFinished:      w.ShouldPodBeFinished(uid),
		TerminationRequested:  w.IsPodTerminationRequested(uid),
		ContainersTerminating: w.ShouldPodContainersBeTerminating(uid),
		RuntimeRemoved:        w.ShouldPodRuntimeBeRemoved(uid),
		ContentRemoved:        w.ShouldPodContentBeRemoved(uid),
		MirrorTerminating:     w.IsPodForMirrorPodTerminatingByFullName(fullName),
	}
}

// row builds a window from the table's T/F letters, e.g. "FTFFFFFF".
func row(s string) window {
	if len(s) != 8 {
		panic(fmt.Sprintf("row %q: want 8 letters", s))
	}
	b := func(i int) bool { return s[i] == 'T' }
	return window{b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7)}
}

// terminator starts a pod's termination in one of three ways: the H
// (evicted) and I (deleted) columns are the D-G columns reached through an
// eviction or a deletion instead of a plain kill.
type terminator struct {
	name string
	do   func(r *rig, p *v1.Pod)
}

var (
	byKill     = terminator{"kill", func(r *rig, p *v1.Pod) { r.kill(p, nil) }}
	byEviction = terminator{"evicted", func(r *rig, p *v1.Pod) { r.kill(p, &podworker.KillPodOptions{Evict: true}) }}
	byDeletion = terminator{"deleted", func(r *rig, p *v1.Pod) { r.update(podworker.SyncPodUpdate, deleted(p, nil)) }}
)

// stageD brings a started pod to "termination requested, not yet acted
// on": its SyncPod is busy (and ignores the cancellation), so the worker
// cannot start stopping containers.
func stageD(term terminator) func(r *rig, p *v1.Pod) func() {
	return func(r *rig, p *v1.Pod) func() {
		g := r.f.HoldUncancelable(p.UID, podworker.HookSyncPod)
		r.update(podworker.SyncPodUpdate, p)
		r.entered(g)
		term.do(r, p)
		r.settle()
		require.Equal(r.t, podworker.StageTerminationRequested, r.info(p.UID).Stage)
		return g.Release
	}
}

// stageE: SyncTerminatingPod is running.
func stageE(term terminator) func(r *rig, p *v1.Pod) func() {
	return func(r *rig, p *v1.Pod) func() {
		g := r.hold(p.UID, podworker.HookSyncTerminatingPod)
		term.do(r, p)
		r.entered(g)
		require.Equal(r.t, podworker.StageTerminating, r.info(p.UID).Stage)
		return g.Release
	}
}

// stageF: containers stopped, SyncTerminatedPod is running.
func stageF(term terminator) func(r *rig, p *v1.Pod) func() {
	return func(r *rig, p *v1.Pod) func() {
		g := r.hold(p.UID, podworker.HookSyncTerminatedPod)
		term.do(r, p)
		r.entered(g)
		require.Equal(r.t, podworker.StageTerminated, r.info(p.UID).Stage)
		return g.Release
	}
}

// stageG: finished.
func stageG(term terminator) func(r *rig, p *v1.Pod) func() {
	return func(r *rig, p *v1.Pod) func() {
		term.do(r, p)
		r.settle()
		require.Equal(r.t, podworker.StageFinished, r.info(p.UID).Stage)
		return nil
	}
}

// TestWindowTruthTable checks every query of the window against every
// column of SPEC §1.15, with decisions D2 and D3 applied. The pods of
// columns C-I are static pods, so the mirror-pod query has a holder to
// look at.
func TestWindowTruthTable(t *testing.T) {
	const full = "web_ns"
	// started creates the static pod and lets SyncPod run once.
	started := func(r *rig, p *v1.Pod) {
		r.update(podworker.SyncPodCreate, p)
		r.settle()
	}
	type column struct {
		name string
		// setup brings the pod "web" (UID "u") to the column's situation;
		// it returns what lets the pod go on, if anything.
		setup func(r *rig, p *v1.Pod) func()
		want  window
		// beforeRun: setup runs before Run is started (goOn starts it).
		beforeRun bool
	}
	columns := []column{
		{"A unknown, not synced", func(*rig, *v1.Pod) func() { return nil }, row("FTFFFFFF"), false},
		{"B unknown, synced", func(r *rig, _ *v1.Pod) func() { r.w.SyncKnownPods(nil); return nil }, row("FFTFTTTF"), false},
		{"B forgotten after finishing", func(r *rig, p *v1.Pod) func() {
			started(r, p)
			r.kill(p, nil)
			r.settle()
			r.w.SyncKnownPods(nil)
			r.absent(p.UID)
			return nil
		}, row("FFTFTTTF"), false},
		{"C not started", func(r *rig, p *v1.Pod) func() {
			// Run has not started: the update is only recorded.
			r.update(podworker.SyncPodCreate, p)
			return r.start
		}, row("FTFFFFFF"), true},
		{"C syncing", func(r *rig, p *v1.Pod) func() { started(r, p); return nil }, row("FTFFFFFF"), false},
	}
	for _, c := range []struct {
		term terminator
		// The D-G rows for this way of terminating.
		d, e, f, g window
	}{
		{byKill, row("FTFTFFFT"), row("FTFTTFFT"), row("TFFTTTFF"), row("TFTTTTFF")},
		{byEviction, row("FTFTFFTT"), row("FTFTTFTT"), row("TFFTTTTF"), row("TFTTTTTF")},
		{byDeletion, row("FTFTFFFT"), row("FTFTTFFT"), row("TFFTTTTF"), row("TFTTTTTF")},
	} {
		col := func(letter, what string) string {
			if c.term.name != "kill" {
				letter = map[string]string{"evicted": "H", "deleted": "I"}[c.term.name] + "/" + letter
			}
			return letter + " " + what + " (" + c.term.name + ")"
		}
		withStart := func(stage func(terminator) func(*rig, *v1.Pod) func()) func(*rig, *v1.Pod) func() {
			return func(r *rig, p *v1.Pod) func() { started(r, p); return stage(c.term)(r, p) }
		}
		columns = append(columns,
			column{name: col("D", "termination requested"), setup: withStart(stageD), want: c.d},
			column{name: col("E", "terminating"), setup: withStart(stageE), want: c.e},
			column{name: col("F", "terminated"), setup: withStart(stageF), want: c.f},
			column{name: col("G", "finished"), setup: withStart(stageG), want: c.g},
		)
	}
	columns = append(columns,
		// Footnote 1: a static pod that finished without ever starting
		// never began stopping containers.
		column{name: "G static pod finished without starting", setup: func(r *rig, p *v1.Pod) func() {
			started(r, mkStatic("holder", "web"))
			r.update(podworker.SyncPodCreate, p)
			r.kill(p, nil)
			r.settle()
			require.True(t, r.info(p.UID).Finished)
			require.False(t, r.info(p.UID).Started)
			return nil
		}, want: row("TFTTFTFF")},
	)

	for _, c := range columns {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := newRig(t, podworker.Options[struct{}]{})
				if !c.beforeRun {
					r.start()
				}
				p := mkStatic("u", "web")
				goOn := c.setup(r, p)
				assert.Equal(t, c.want, r.window("u", full))
				if goOn != nil {
					goOn()
				}
				r.settle()
			})
		})
	}
}

// The mirror-pod query is keyed by full name and only ever looks at the
// static pod that holds it (SPEC §1.15 footnote 3).
func TestWindowMirrorPodQueryOnlyForTheHolder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		// A non-static pod being terminated: never reported.
		normal := podworkertest.NewPod("n", "ns", "web")
		r.update(podworker.SyncPodCreate, normal)
		r.settle()
		g := r.hold("n", podworker.HookSyncTerminatingPod)
		r.kill(normal, nil)
		r.entered(g)
		assert.False(t, r.w.IsPodForMirrorPodTerminatingByFullName("web_ns"))
		g.Release()
		r.settle()

		// A waiting static pod whose termination was requested: not the
		// holder, so not reported; the holder is.
		holder, waiting := mkStatic("h", "web"), mkStatic("w", "web")
		r.update(podworker.SyncPodCreate, holder)
		r.update(podworker.SyncPodCreate, waiting)
		r.settle()
		gh := r.hold("h", podworker.HookSyncTerminatingPod)
		r.kill(waiting, nil)
		r.settle()
		assert.False(t, r.w.IsPodForMirrorPodTerminatingByFullName("web_ns"))
		r.kill(holder, nil)
		r.entered(gh)
		assert.True(t, r.w.IsPodForMirrorPodTerminatingByFullName("web_ns"))
		assert.False(t, r.w.IsPodForMirrorPodTerminatingByFullName("other_ns"))
		gh.Release()
		r.settle()
		assert.False(t, r.w.IsPodForMirrorPodTerminatingByFullName("web_ns"))
	})
}

// A pod known only from the runtime answers as column E while its
// containers are stopped, and as column B once it is forgotten.
func TestWindowRuntimeOnlyPod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		r.w.SyncKnownPods(nil)
		g := r.hold("rt", podworker.HookSyncTerminatingRuntimePod)
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "rt", Namespace: "ns", Name: "rt"}})
		r.entered(g)
		// Deleted, and content only once terminated.
		assert.Equal(t, row("FTFTTFFF"), r.window("rt", "rt_ns"))
		g.Release()
		r.settle()
		r.absent("rt")
		assert.Equal(t, row("FFTFTTTF"), r.window("rt", "rt_ns"))
	})
}
