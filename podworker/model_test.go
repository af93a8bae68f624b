package podworker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file checks the engine against a simple sequential model. A driver
// applies random operations (create, update, sync, kill, evict, delete,
// runtime kill, SyncKnownPods with housekeeping's re-adds, hook errors,
// panics, slow hooks, time passing) and waits for the engine to settle
// after each one (testing/synctest). Every hook call and every stage change
// goes, in causal order, to one checker that replays them per UID and
// fails on any illegal step. At the end every pod's newest desired state
// must have been synced, every pod is killed, and the engine must drain to
// nothing and shut down without leaving a goroutine.

// outcome is what a scripted hook call does.
type outcome int

const (
	succeed outcome = iota
	fail
	panicking
	terminal   // SyncPod reports the pod finished
	hold       // block until released or cancelled
	retryLater // fail with RetryAfter
)

type modelStatus struct{ stopped bool }

// uidModel is the checker's and driver's view of one UID.
type uidModel struct {
	// Checker state for the current generation (reset when the engine
	// forgets the UID).
	gen           int
	inFlight      bool
	syncPodSeen   bool
	termStarted   bool
	termSucceeded bool
	cleanupDone   bool
	lastGrace     int64
	lastSyncedPod *v1.Pod
	statusStopped bool
	snapGrace     int64
	held          bool
	heldKind      hookKind
	heldGrace     int64
	// Driver state.
	desired   bool
	pod       *v1.Pod
	version   int
	static    bool
	fullName  string
	script    []outcome
	release   chan struct{}
	chans     []killChan
	everAdded bool
}

type killChan struct {
	ch  chan struct{}
	gen int
}

type model struct {
	t testing.TB
	// slotHolder is, per static full name, the UID whose hooks run.
	slotHolder map[string]types.UID
	mu         sync.Mutex
	uids       map[types.UID]*uidModel
	order      []types.UID
	errs       []string
	calls      int
	w          *PodWorkers[modelStatus]
	synced     bool
	// transitions receives every stage change (a subscription).
	transitions chan Transition
}

func (m *model) failf(format string, args ...any) {
	if len(m.errs) < 20 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
}

func (m *model) check() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.errs) > 0 {
		m.t.Fatalf("model violations:\n%s", joinLines(m.errs))
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}

// drainLocked feeds the checker every transition the engine has published
// so far. The engine publishes a transition under its lock, before the
// worker that caused it runs a hook and after the hook it follows returned,
// so draining before each hook's bookkeeping replays them in causal order.
func (m *model) drainLocked() {
	for {
		select {
		case t := <-m.transitions:
			m.movedLocked(t)
		default:
			return
		}
	}
}

func (m *model) drain() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
}

// movedLocked checks one transition.
func (m *model) movedLocked(t Transition) {
	from, to := t.From, t.To
	r := struct{ uid types.UID }{t.UID}
	u := m.uids[r.uid]
	if u == nil {
		m.failf("%s: transition %s->%s for a UID never sent", r.uid, from, to)
		return
	}
	if to != StageAbsent && to < from {
		m.failf("%s: stage went backwards %s->%s", r.uid, from, to)
	}
	switch to {
	case StageTerminated:
		if !u.termSucceeded {
			// Only a pod that never ran anything may skip SyncTerminatingPod.
			if u.syncPodSeen || (u.termStarted && !u.statusStopped) {
				m.failf("%s: terminated without a successful SyncTerminatingPod", r.uid)
			}
			u.termSucceeded = true
		}
	case StageAbsent:
		if u.inFlight {
			m.failf("%s: forgotten while a hook runs", r.uid)
		}
		for _, kc := range u.chans {
			if kc.gen == u.gen && !isClosed(kc.ch) {
				m.failf("%s: forgotten with an open CompletedCh", r.uid)
			}
		}
		if m.slotHolder[u.fullName] == r.uid {
			delete(m.slotHolder, u.fullName)
		}
		u.gen++
		u.syncPodSeen, u.termStarted, u.termSucceeded, u.cleanupDone = false, false, false, false
		u.lastGrace, u.lastSyncedPod, u.statusStopped, u.snapGrace = 0, nil, false, 0
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type hookKind int

const (
	hSync hookKind = iota
	hTerminating
	hTerminated
	hRuntime
)

// enter checks and records the start of a hook and returns its outcome.
func (m *model) enter(uid types.UID, kind hookKind, grace int64, pod *v1.Pod) (outcome, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	m.calls++
	u := m.uids[uid]
	if u == nil {
		m.failf("%s: hook for a UID never sent", uid)
		return succeed, nil
	}
	if u.inFlight {
		m.failf("%s: two hooks at once", uid)
	}
	u.inFlight = true
	if u.static && kind != hRuntime {
		if h, ok := m.slotHolder[u.fullName]; ok && h != uid {
			m.failf("%s: hooks run while %s holds static full name %s", uid, h, u.fullName)
		}
		m.slotHolder[u.fullName] = uid
	}
	switch kind {
	case hSync:
		if u.termStarted {
			m.failf("%s: SyncPod after termination started", uid)
		}
		u.syncPodSeen = true
	case hTerminating, hRuntime:
		if u.termSucceeded {
			m.failf("%s: SyncTerminatingPod after it succeeded", uid)
		}
		if grace < 1 {
			m.failf("%s: grace %d below 1", uid, grace)
		}
		if u.lastGrace != 0 && grace > u.lastGrace {
			m.failf("%s: grace rose from %d to %d", uid, u.lastGrace, grace)
		}
		u.lastGrace = grace
		u.termStarted = true
	case hTerminated:
		if !u.termSucceeded {
			m.failf("%s: SyncTerminatedPod before termination succeeded", uid)
		}
	}
	o := succeed
	if len(u.script) > 0 {
		o = u.script[0]
		u.script = u.script[1:]
	}
	if o == terminal && kind != hSync {
		o = succeed
	}
	if kind == hSync && pod != nil && o != fail && o != panicking && o != retryLater && o != hold {
		u.lastSyncedPod = pod
	}
	return o, u.release
}

func (m *model) leave(uid types.UID, kind hookKind, err error, pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	u := m.uids[uid]
	u.inFlight, u.held = false, false
	if err != nil {
		return
	}
	switch kind {
	case hSync:
		u.lastSyncedPod = pod
	case hTerminating, hRuntime:
		u.termSucceeded = true
	case hTerminated:
		u.cleanupDone = true
		if m.slotHolder[u.fullName] == uid {
			delete(m.slotHolder, u.fullName)
		}
	}
}

// play runs a hook under the model.
func (m *model) play(ctx context.Context, uid types.UID, kind hookKind, grace int64, pod *v1.Pod) (bool, error) {
	o, release := m.enter(uid, kind, grace, pod)
	var err error
	term := false
	switch o {
	case fail:
		err = errors.New("scripted failure")
	case retryLater:
		err = RetryAfter(errors.New("scripted retry"), 3*time.Second)
	case panicking:
		m.leave(uid, kind, errors.New("panicked"), pod)
		panic("scripted panic")
	case terminal:
		term = true
	case hold:
		m.mu.Lock()
		u := m.uids[uid]
		u.held, u.heldKind, u.heldGrace = true, kind, grace
		m.mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if kind == hSync && ctx.Err() != nil && err == nil {
		// A cancelled SyncPod reports the cancellation, as a hook should.
		err = ctx.Err()
	}
	m.leave(uid, kind, err, pod)
	return term, err
}

func (m *model) syncer() PodSyncerFuncs[modelStatus] {
	return PodSyncerFuncs[modelStatus]{
		SyncPodFunc: func(ctx context.Context, _ UpdateType, pod, _ *v1.Pod, _ modelStatus) (bool, error) {
			return m.play(ctx, pod.UID, hSync, 0, pod)
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, _ modelStatus, grace int64, _ func(*v1.PodStatus)) error {
			_, err := m.play(ctx, pod.UID, hTerminating, grace, pod)
			return err
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, _ modelStatus) error {
			_, err := m.play(ctx, pod.UID, hTerminated, 0, pod)
			return err
		},
		SyncTerminatingRuntimePodFunc: func(ctx context.Context, p RuntimePod) error {
			_, err := m.play(ctx, p.UID, hRuntime, 1, nil)
			return err
		},
	}
}

// PodStatus and NothingRunning make the model a StatusSource and a
// StoppedChecker: a pod is reported stopped when nothing ran for it yet in
// this generation, which lets first-seen terminal pods skip termination.
func (m *model) PodStatus(_ context.Context, uid types.UID, _ time.Time) (modelStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.uids[uid]
	st := modelStatus{stopped: !u.syncPodSeen && !u.termStarted}
	u.statusStopped = st.stopped
	return st, nil
}

func (m *model) NothingRunning(s modelStatus) bool { return s.stopped }

// source yields the driver's choices: from a seeded generator, or from fuzz
// input.
type source interface {
	intn(n int) int
}

type randSource struct{ r *rand.Rand }

func (s randSource) intn(n int) int { return s.r.IntN(n) }

type byteSource struct {
	data []byte
	i    int
}

func (s *byteSource) intn(n int) int {
	if s.i >= len(s.data) {
		return 0
	}
	b := int(s.data[s.i])
	s.i++
	return b % n
}

func (s *byteSource) done() bool { return s.i >= len(s.data) }

// runModel drives ops operations chosen by src over nUIDs UIDs.
func runModel(t *testing.T, src source, ops, nUIDs int, more func() bool) {
	synctest.Test(t, func(t *testing.T) {
		m := &model{t: t, uids: map[types.UID]*uidModel{}, slotHolder: map[string]types.UID{}}
		for i := range nUIDs {
			uid := types.UID(fmt.Sprintf("uid-%03d", i))
			u := &uidModel{release: make(chan struct{})}
			if i%5 == 0 {
				// Every fifth UID is a static pod; four full names share them.
				u.static = true
				u.fullName = fmt.Sprintf("static-%d_kube-system", i%4)
			} else {
				u.fullName = fmt.Sprintf("pod-%d_default", i)
			}
			m.uids[uid] = u
			m.order = append(m.order, uid)
		}
		w, err := New[modelStatus](m.syncer(), Options[modelStatus]{
			Status:             m,
			ResyncInterval:     time.Minute,
			BackOff:            time.Second,
			MaxBackOff:         20 * time.Second,
			MaxConcurrentSyncs: []int{0, 3}[src.intn(2)],
		})
		if err != nil {
			t.Fatal(err)
		}
		m.w = w
		m.transitions = make(chan Transition, 1<<14)
		sub := w.Subscribe(m.transitions)
		ctx, cancel := context.WithCancel(t.Context())
		runDone := make(chan error, 1)
		go func() { runDone <- w.Run(ctx) }()

		for i := 0; i < ops && more(); i++ {
			uid := m.step(src)
			synctest.Wait()
			m.drain()
			if i%8 == 0 {
				m.checkWindow(m.order...)
			} else {
				m.checkWindow(uid)
			}
			m.check()
		}
		m.settle()
		m.check()
		m.checkNewestSynced()
		m.killAll()
		m.drain()
		m.check()
		if n := sub.Dropped(); n != 0 {
			t.Fatalf("the checker's subscription dropped %d transitions", n)
		}

		cancel()
		if err := <-runDone; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := w.UpdatePod(context.Background(), UpdatePodOptions{Pod: m.newPod(m.order[0])}); !errors.Is(err, ErrStopped) {
			t.Fatalf("UpdatePod after Run returned %v, want ErrStopped", err)
		}
		t.Logf("%d operations, %d hook calls", ops, m.calls)
	})
}

func (m *model) newPod(uid types.UID) *v1.Pod {
	u := m.uids[uid]
	u.version++
	name, ns := splitFullName(u.fullName)
	grace := int64(1 + u.version%45)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, ResourceVersion: fmt.Sprint(u.version)},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
	if u.static {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	}
	if u.pod != nil {
		p.DeletionTimestamp = u.pod.DeletionTimestamp
		p.DeletionGracePeriodSeconds = u.pod.DeletionGracePeriodSeconds
		p.Status.Phase = u.pod.Status.Phase
	}
	return p
}

func splitFullName(s string) (string, string) {
	for i := range s {
		if s[i] == '_' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// step performs one random operation.
func (m *model) step(src source) types.UID {
	uid := m.order[src.intn(len(m.order))]
	u := m.uids[uid]
	ctx := context.Background()
	send := func(o UpdatePodOptions) {
		if err := m.w.UpdatePod(ctx, o); err != nil {
			m.mu.Lock()
			m.failf("%s: UpdatePod: %v", uid, err)
			m.mu.Unlock()
		}
	}
	switch op := src.intn(20); {
	case op < 6: // create or update
		if u.pod != nil && (u.pod.DeletionTimestamp != nil || u.pod.Status.Phase != "") && src.intn(2) == 0 {
			// A new incarnation under the same UID (a static pod's manifest
			// written again): the engine must restart the UID cleanly.
			u.pod = nil
		}
		p := m.newPod(uid)
		types := []UpdateType{SyncPodCreate, SyncPodUpdate, SyncPodSync}
		t := types[src.intn(3)]
		if !u.everAdded {
			t = SyncPodCreate
		}
		u.pod, u.desired, u.everAdded = p, true, true
		send(UpdatePodOptions{UpdateType: t, Pod: p})
	case op < 8: // delete with a grace period
		if u.pod == nil {
			return uid
		}
		p := m.newPod(uid)
		now := metav1.Now()
		g := int64(src.intn(40))
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &g
		u.pod = p
		send(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: p})
	case op < 9: // the pod reached a terminal phase in config
		if u.pod == nil {
			return uid
		}
		p := m.newPod(uid)
		p.Status.Phase = []v1.PodPhase{v1.PodSucceeded, v1.PodFailed}[src.intn(2)]
		u.pod = p
		send(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: p})
	case op < 11: // kill or evict
		if u.pod == nil {
			return uid
		}
		ch := make(chan struct{})
		ko := &KillPodOptions{CompletedCh: ch, Evict: src.intn(3) == 0}
		if src.intn(2) == 0 {
			g := int64(src.intn(30))
			ko.PodTerminationGracePeriodSecondsOverride = &g
		}
		m.addChan(uid, ch)
		send(UpdatePodOptions{UpdateType: SyncPodKill, Pod: u.pod, KillPodOptions: ko})
	case op < 12: // runtime-only kill
		name, ns := splitFullName(u.fullName)
		send(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &RuntimePod{UID: uid, Name: name, Namespace: ns}})
	case op < 13: // config removed the pod
		u.desired = false
	case op < 15: // script the next hooks of this UID
		m.mu.Lock()
		for range 1 + src.intn(3) {
			u.script = append(u.script, []outcome{fail, panicking, terminal, hold, retryLater, succeed}[src.intn(6)])
		}
		m.mu.Unlock()
	case op < 16: // slow hooks finish: release every held hook
		m.mu.Lock()
		for _, u := range m.uids {
			close(u.release)
			u.release = make(chan struct{})
		}
		m.mu.Unlock()
	case op < 18: // time passes
		time.Sleep(time.Duration(1+src.intn(30000)) * time.Millisecond)
	default: // housekeeping
		m.housekeeping()
	}
	return uid
}

func (m *model) addChan(uid types.UID, ch chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.uids[uid]
	u.chans = append(u.chans, killChan{ch: ch, gen: u.gen})
}

// housekeeping is what lifecycle does: SyncKnownPods, then a Create for
// each desired pod without a worker.
func (m *model) housekeeping() {
	var desired []*v1.Pod
	for _, uid := range m.order {
		if u := m.uids[uid]; u.desired && u.pod != nil {
			desired = append(desired, u.pod)
		}
	}
	known := m.w.SyncKnownPods(desired)
	synctest.Wait()
	m.synced = true
	for _, p := range desired {
		if _, ok := known[p.UID]; !ok {
			if err := m.w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p}); err != nil {
				m.mu.Lock()
				m.failf("%s: re-add: %v", p.UID, err)
				m.mu.Unlock()
			}
		}
	}
}

// checkWindow cross-checks the window's answers with each other and with
// the snapshots.
func (m *model) checkWindow(uids ...types.UID) {
	w := m.w
	for _, uid := range uids {
		info, ok := w.Pod(uid)
		known := w.IsPodKnownTerminated(uid)
		could := w.CouldHaveRunningContainers(uid)
		fin := w.ShouldPodBeFinished(uid)
		req := w.IsPodTerminationRequested(uid)
		term := w.ShouldPodContainersBeTerminating(uid)
		rt := w.ShouldPodRuntimeBeRemoved(uid)
		m.mu.Lock()
		if ok {
			if known == could {
				m.failf("%s: known terminated %v but could have running %v", uid, known, could)
			}
			if fin && !known && info.Started {
				m.failf("%s: finished but not terminated", uid)
			}
			if known && !req && info.Started {
				m.failf("%s: terminated without termination requested", uid)
			}
			if term && !req {
				m.failf("%s: containers terminating without a request", uid)
			}
			if rt != known {
				m.failf("%s: runtime removable %v, terminated %v", uid, rt, known)
			}
			if info.Stage == StageFinished != fin {
				m.failf("%s: stage %s but finished %v", uid, info.Stage, fin)
			}
			u := m.uids[uid]
			if u.snapGrace != 0 && info.GracePeriod > u.snapGrace {
				m.failf("%s: effective grace rose from %d to %d", uid, u.snapGrace, info.GracePeriod)
			}
			if info.GracePeriod != 0 {
				u.snapGrace = info.GracePeriod
			}
			if u.held && u.heldKind == hSync && req {
				m.failf("%s: SyncPod still running after termination was requested", uid)
			}
			if u.held && u.heldKind == hTerminating && info.GracePeriod < u.heldGrace {
				m.failf("%s: SyncTerminatingPod still running with grace %d after it shortened to %d", uid, u.heldGrace, info.GracePeriod)
			}
			// Decision D2: CompletedCh is closed exactly when no container
			// can run any more.
			for _, kc := range u.chans {
				if kc.gen == u.gen && isClosed(kc.ch) == could {
					m.failf("%s: CompletedCh closed %v while could-have-running is %v", uid, !could, could)
				}
			}
		} else if could == m.synced {
			m.failf("%s: unknown UID, synced %v, could have running %v", uid, m.synced, could)
		}
		m.mu.Unlock()
	}
}

// settle stops scripting failures and lets every pending retry run.
func (m *model) settle() {
	m.mu.Lock()
	for _, u := range m.uids {
		u.script = nil
		close(u.release)
		u.release = make(chan struct{})
	}
	m.mu.Unlock()
	synctest.Wait()
	// Backoffs are at most 20s (+50% jitter); two rounds cover every retry.
	for range 4 {
		time.Sleep(31 * time.Second)
		synctest.Wait()
	}
	// Take in what settling did before anything new is sent: a worker
	// forgotten meanwhile must be seen gone before killAll gives its UID
	// a CompletedCh (the fuzzer found the checker charging a new life's
	// channel to the old one, in testdata/fuzz).
	m.drain()
}

// checkNewestSynced: every pod still syncing has had its newest desired
// state synced.
func (m *model) checkNewestSynced() {
	for _, uid := range m.order {
		info, ok := m.w.Pod(uid)
		if ok && info.Stage == StageNotStarted {
			// Only a static pod waiting for a live holder may stay unstarted
			// (decision D7: a freed slot starts the next pod by itself).
			if !info.Static || !m.slotHeld(info) {
				m.mu.Lock()
				m.failf("%s: never started, and nothing holds its full name", uid)
				m.mu.Unlock()
			}
		}
		if !ok || info.Stage != StageSyncing {
			continue
		}
		m.mu.Lock()
		u := m.uids[uid]
		if u.lastSyncedPod != u.pod {
			got, want := "<nil>", "<nil>"
			if u.lastSyncedPod != nil {
				got = u.lastSyncedPod.ResourceVersion
			}
			if u.pod != nil {
				want = u.pod.ResourceVersion
			}
			m.failf("%s: newest desired pod version %s, last synced %s", uid, want, got)
		}
		m.mu.Unlock()
	}
}

// slotHeld reports whether another static pod of info's full name holds
// its slot: one that started and has not finished.
func (m *model) slotHeld(info PodInfo) bool {
	for _, o := range m.w.Pods() {
		if o.UID != info.UID && o.Static && o.FullName == info.FullName && o.Started && !o.Finished {
			return true
		}
	}
	return false
}

// killAll kills every pod, lets it finish, and makes the engine forget all.
func (m *model) killAll() {
	for _, uid := range m.order {
		u := m.uids[uid]
		if u.pod == nil {
			continue
		}
		ch := make(chan struct{})
		m.addChan(uid, ch)
		if err := m.w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodKill, Pod: u.pod, KillPodOptions: &KillPodOptions{CompletedCh: ch}}); err != nil {
			m.t.Fatalf("%s: kill: %v", uid, err)
		}
		u.desired = false
	}
	synctest.Wait()
	time.Sleep(time.Second)
	synctest.Wait()
	left := m.w.Pods()
	sort.Slice(left, func(i, j int) bool { return left[i].UID < left[j].UID })
	for _, info := range left {
		if info.Stage != StageFinished {
			m.t.Fatalf("%s: after killing everything the worker is %s", info.UID, info.Stage)
		}
	}
	m.mu.Lock()
	for _, uid := range m.order {
		for _, kc := range m.uids[uid].chans {
			if !isClosed(kc.ch) {
				m.failf("%s: CompletedCh still open after the pod finished", uid)
			}
		}
	}
	m.mu.Unlock()
	if got := m.w.SyncKnownPods(nil); len(got) != 0 {
		m.t.Fatalf("SyncKnownPods(nil) kept %d workers", len(got))
	}
	if n := len(m.w.Pods()); n != 0 {
		m.t.Fatalf("%d workers left after every pod was forgotten", n)
	}
	m.w.mu.Lock()
	statics := m.w.m.staticSlots()
	m.w.mu.Unlock()
	if statics != 0 {
		m.t.Fatalf("%d static slots left after every pod was forgotten", statics)
	}
}

func TestModelRandomized(t *testing.T) {
	ops := 100_000
	if testing.Short() {
		ops = 10_000
	}
	const seeds = 5
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			src := randSource{rand.New(rand.NewPCG(seed, seed*7919))}
			runModel(t, src, ops/seeds, 120, func() bool { return true })
		})
	}
}

func FuzzUpdateSequence(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add([]byte{3, 0, 0, 3, 9, 0, 19, 0, 14, 0, 3, 7, 0, 16, 0, 19})
	f.Add([]byte{1, 5, 1, 5, 1, 10, 2, 11, 3, 12, 19, 1, 13, 19, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		src := &byteSource{data: data}
		runModel(t, src, len(data), 6, func() bool { return !src.done() })
	})
}
