package podworker

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestDriver runs the interaction scripts of TestMachine (testdata/*.txt,
// see script_test.go) through the driver: the real PodWorkers, its Run
// loop, worker goroutines and fake clock, over a scripted syncer, inside a
// testing/synctest bubble. A step is done when every goroutine of the
// bubble is blocked (synctest.Wait), and its output is what the driver let
// an embedder see: the calls its hooks got, the transitions Subscribe
// delivered, the CompletedChs it closed, the hook contexts it cancelled,
// the slow hooks it logged, and what Pod, Pods, the window, Resync and
// SyncKnownPods answer. It must be the machine's expected output less the
// lines only the machine sees (ready, wake timers, next due).
//
// To step the driver as a script steps the machine, workers are held
// before they take work (PodWorkers.pause) until next or run lets one go,
// and every hook is held until done returns it (a scripted hook ignores its
// context, as the machine's does). The driver's timer loop runs freely
// against the fake clock, as in production: a retry due at once (a
// RetryAfter below zero) is taken at once, where the machine waits for the
// next tick, so the few script passages that show this are marked
// machine-only (config machine-only), as are values Options refuses.
func TestDriver(t *testing.T) {
	for _, path := range scripts(t) {
		t.Run(scriptName(path), func(t *testing.T) {
			script, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				e := newDriverEnv(t, scriptConfig{}.withDefaults())
				defer func() { e.close() }()
				datadriven.RunTestFromString(t, string(script), func(t *testing.T, d *datadriven.TestData) string {
					if d.Cmd == "config" {
						e.close()
						e = newDriverEnv(t, parseConfig(t, d))
						return d.Expected
					}
					if e.machineOnly || d.Cmd == "sizes" {
						return d.Expected
					}
					got := e.handle(t, d)
					if want := observable(d.Expected); got != want {
						d.Fatalf(t, "%s: the driver's output differs from the machine's (less the lines only the machine sees):\nmachine:\n%s\ndriver:\n%s", path, want, got)
					}
					return d.Expected
				})
			})
		})
	}
}

// driverEnv is one PodWorkers and what the script did with it.
type driverEnv struct {
	scriptWorld
	t           *testing.T
	w           *PodWorkers[types.UID]
	stop        context.CancelFunc
	ran         chan error
	transitions chan Transition
	// machineOnly: the script is the machine's alone until the next config.
	machineOnly bool
	// stopped: shutdown ran.
	stopped bool

	mu sync.Mutex
	// entered are the hook calls that began since the last step's output;
	// held are the running ones, by pod.
	entered []*heldCall
	held    map[string]*heldCall
	// waiting counts workers held before they take work; permits lets one
	// go, and closing all of them, for good.
	waiting int
	permits chan struct{}
	closing chan struct{}
	// checked: the engine asked whether anything of the pod runs (decision
	// D4), for the hook it calls next.
	checked map[types.UID]bool
	// slow are the slow-hook reports logged since the last step's output;
	// reported are the hook calls reported at least once.
	slow     []slowHook
	reported map[*heldCall]bool
	// closed and cancelled are the channels and contexts already shown.
	closed    map[string]bool
	cancelled map[context.Context]bool
}

// heldCall is one hook call, held until the script returns it.
type heldCall struct {
	call   scriptCall
	result chan scriptDone
}

func newDriverEnv(t *testing.T, c scriptConfig) *driverEnv {
	e := &driverEnv{
		scriptWorld: newScriptWorld(),
		t:           t,
		machineOnly: c.machineOnly,
		held:        map[string]*heldCall{},
		permits:     make(chan struct{}),
		closing:     make(chan struct{}),
		checked:     map[types.UID]bool{},
		reported:    map[*heldCall]bool{},
		closed:      map[string]bool{},
		cancelled:   map[context.Context]bool{},
		transitions: make(chan Transition, 4096),
	}
	if c.machineOnly {
		return e
	}
	w, err := New[types.UID](driverSyncer{e}, Options[types.UID]{
		Status:          driverStatus{e},
		ResyncInterval:  c.resync,
		BackOff:         c.backOff,
		MaxBackOff:      c.maxBackOff,
		SlowHookWarning: c.slowWarning,
		Clock:           e.clock,
		Logger:          logr.New(slowLogSink{e}),
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	w.m.cfg.jitter = func(d time.Duration) time.Duration { return d }
	w.pause = e.pause
	// A script holds hooks as long as it likes and then runs another pod's:
	// as for the machine, each hook has a worker of its own at once. The
	// bound of workers per CPU, and its stall check, are stall_test's.
	w.cpuWorkers = math.MaxInt
	w.Subscribe(e.transitions)
	e.w = w
	ctx, stop := context.WithCancel(context.Background())
	e.stop, e.ran = stop, make(chan error, 1)
	go func() { e.ran <- w.Run(ctx) }()
	synctest.Wait()
	return e
}

// close shuts the engine down for good: Run's context ends, held workers
// and hooks are let go, and Run returns.
func (e *driverEnv) close() {
	if e.w == nil {
		return
	}
	e.shutdown()
	e.mu.Lock()
	for name, h := range e.held {
		h.result <- scriptDone{err: context.Canceled}
		delete(e.held, name)
	}
	e.mu.Unlock()
	if err := <-e.ran; err != nil {
		e.t.Errorf("Run: %v", err)
	}
	e.w = nil
}

// shutdown ends Run's context and, once the engine has stopped (so no
// worker takes work any more), lets the held workers go.
func (e *driverEnv) shutdown() {
	if e.stopped {
		return
	}
	e.stopped = true
	e.stop()
	synctest.Wait()
	close(e.closing)
	synctest.Wait()
}

// pause holds a worker before it takes work, until next or run lets it go.
func (e *driverEnv) pause() {
	e.mu.Lock()
	e.waiting++
	e.mu.Unlock()
	select {
	case <-e.permits:
	case <-e.closing:
	}
	e.mu.Lock()
	e.waiting--
	e.mu.Unlock()
}

// release lets one held worker take work, and reports whether one was
// waiting.
func (e *driverEnv) release() bool {
	e.mu.Lock()
	n := e.waiting
	e.mu.Unlock()
	if n == 0 {
		return false
	}
	e.permits <- struct{}{}
	synctest.Wait()
	return true
}

// hook runs one hook call: it is held until the script returns it.
func (e *driverEnv) hook(c scriptCall) (bool, error) {
	h := &heldCall{call: c, result: make(chan scriptDone, 1)}
	e.mu.Lock()
	if c.hook == HookSyncTerminatingPod {
		h.call.checkStopped = e.checked[c.uid]
	}
	delete(e.checked, c.uid)
	e.entered = append(e.entered, h)
	e.held[string(c.uid)] = h
	e.mu.Unlock()
	r := <-h.result
	if r.panic {
		panic("boom")
	}
	return r.terminal, r.err
}

// driverSyncer is the scripted PodSyncer: every hook is held by the env.
type driverSyncer struct{ e *driverEnv }

func (s driverSyncer) SyncPod(ctx context.Context, ut UpdateType, pod, mirrorPod *v1.Pod, _ types.UID) (bool, error) {
	return s.e.hook(scriptCall{uid: pod.UID, hook: HookSyncPod, ctx: ctx, updateType: ut, pod: pod, mirror: mirrorPod})
}

func (s driverSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ types.UID, grace int64, fn func(*v1.PodStatus)) error {
	_, err := s.e.hook(scriptCall{uid: pod.UID, hook: HookSyncTerminatingPod, ctx: ctx, pod: pod, grace: grace, statusFn: fn != nil})
	return err
}

func (s driverSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, _ types.UID) error {
	_, err := s.e.hook(scriptCall{uid: pod.UID, hook: HookSyncTerminatedPod, ctx: ctx, pod: pod})
	return err
}

func (s driverSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp RuntimePod) error {
	_, err := s.e.hook(scriptCall{uid: rp.UID, hook: HookSyncTerminatingRuntimePod, ctx: ctx, runningPod: rp})
	return err
}

// driverStatus is the StatusSource: a pod's status is its UID, and the
// StoppedChecker notes that it was asked (the machine's check-stopped) and
// answers that something may run, so the hook is called as the machine's
// script expects.
type driverStatus struct{ e *driverEnv }

func (s driverStatus) PodStatus(_ context.Context, uid types.UID, _ time.Time) (types.UID, error) {
	return uid, nil
}

func (s driverStatus) NothingRunning(uid types.UID) bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	s.e.checked[uid] = true
	return false
}

// slowLogSink turns the engine's slow-hook logs into the machine's slow
// effects; it drops every other line.
type slowLogSink struct{ e *driverEnv }

func (s slowLogSink) Init(logr.RuntimeInfo)          {}
func (s slowLogSink) Enabled(int) bool               { return true }
func (s slowLogSink) Error(error, string, ...any)    {}
func (s slowLogSink) WithValues(...any) logr.LogSink { return s }
func (s slowLogSink) WithName(string) logr.LogSink   { return s }
func (s slowLogSink) Info(_ int, msg string, kv ...any) {
	if !strings.HasPrefix(msg, "A pod hook is still running after its context was cancelled") {
		return
	}
	var sl slowHook
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "podUID":
			sl.uid = kv[i+1].(types.UID)
		case "hook":
			sl.hook = hookNamed(kv[i+1].(string))
		case "cancelledFor":
			sl.cancelled = kv[i+1].(time.Duration)
		}
	}
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if h := s.e.held[string(sl.uid)]; h != nil && !s.e.reported[h] {
		s.e.reported[h] = true
		sl.first = true
	}
	s.e.slow = append(s.e.slow, sl)
}

func hookNamed(name string) Hook {
	for h := HookSyncPod; h <= HookSyncTerminatingRuntimePod; h++ {
		if h.String() == name {
			return h
		}
	}
	return 0
}

// observed collects what the driver showed since the last step's output.
func (e *driverEnv) observed() scriptStep {
	var s scriptStep
	for {
		select {
		case tr := <-e.transitions:
			s.moves = append(s.moves, move{uid: tr.UID, from: tr.From, to: tr.To})
			continue
		default:
		}
		break
	}
	for name, ch := range e.chans {
		if e.closed[name] {
			continue
		}
		select {
		case <-ch:
			e.closed[name] = true
			s.closes = append(s.closes, scriptClose{ch: name, uid: e.chanPod[name]})
		default:
		}
	}
	for ctx, name := range e.ctxs {
		if !e.cancelled[ctx] && ctx.Err() != nil {
			e.cancelled[ctx] = true
			s.cancels = append(s.cancels, name)
		}
	}
	e.mu.Lock()
	s.slow, e.slow = e.slow, nil
	e.mu.Unlock()
	return s
}

// printEntered writes the hook calls that began since the last output, and
// returns them.
func (e *driverEnv) printEntered(out *strings.Builder) []*heldCall {
	e.mu.Lock()
	entered := e.entered
	e.entered = nil
	e.mu.Unlock()
	for _, h := range entered {
		e.printCall(out, h.call)
	}
	return entered
}

func (e *driverEnv) send(t *testing.T, d *datadriven.TestData, o UpdatePodOptions) {
	if err := e.w.UpdatePod(context.Background(), o); err != nil {
		d.Fatalf(t, "UpdatePod: %v", err)
	}
}

// killOptions hand over the named channel ch; nil for none.
func (e *driverEnv) killOptions(ch string) *KillPodOptions {
	if ch == "" {
		return nil
	}
	return &KillPodOptions{CompletedCh: e.chans[ch]}
}

// returnHook makes name's running hook return r.
func (e *driverEnv) returnHook(t *testing.T, d *datadriven.TestData, name string, r scriptDone) {
	e.mu.Lock()
	h, ok := e.held[name]
	delete(e.held, name)
	e.mu.Unlock()
	if !ok {
		d.Fatalf(t, "no hook of %s runs", name)
	}
	h.result <- r
	synctest.Wait()
}

func (e *driverEnv) handle(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	sortMoves := false
	switch d.Cmd {
	case "create", "update", "sync":
		u, ch := e.scriptUpdate(t, d)
		e.send(t, d, UpdatePodOptions{UpdateType: u.updateType, Pod: u.pod, MirrorPod: u.mirror, RunningPod: u.runningPod, KillPodOptions: e.killOptions(ch)})
	case "kill":
		k := e.parseKill(t, d)
		ko := e.killOptions(k.ch)
		if ko == nil {
			ko = &KillPodOptions{}
		}
		ko.Evict, ko.PodStatusFunc, ko.PodTerminationGracePeriodSecondsOverride = k.evict, k.statusFn, k.override
		e.send(t, d, UpdatePodOptions{UpdateType: SyncPodKill, Pod: k.pod, KillPodOptions: ko})
	case "kill-runtime":
		rp, ch := e.runtimePod(t, d)
		e.send(t, d, UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: rp, KillPodOptions: e.killOptions(ch)})
	case "resync":
		if !e.w.Resync(types.UID(e.name(t, d))) {
			out.WriteString("refused\n")
		}
	case "next":
		if !e.release() || len(e.printEntered(&out)) == 0 {
			out.WriteString("nothing to run\n")
		}
	case "run":
		for steps := 0; ; steps++ {
			if steps > 100 {
				d.Fatalf(t, "run did not settle in 100 hook calls")
			}
			if !e.release() {
				break
			}
			entered := e.printEntered(&out)
			e.print(&out, e.observed(), false)
			if len(entered) == 0 {
				break
			}
			e.returnHook(t, d, string(entered[0].call.uid), scriptDone{})
			e.print(&out, e.observed(), false)
		}
		return result(&out)
	case "done":
		e.returnHook(t, d, e.name(t, d), parseDone(t, d))
	case "observe":
		e.mu.Lock()
		h, ok := e.held[e.name(t, d)]
		e.mu.Unlock()
		if !ok {
			d.Fatalf(t, "no hook of %s runs", e.name(t, d))
		}
		h.call.ctx.Done()
		return "ok"
	case "tick":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "tick takes a duration")
		}
		e.clock.Step(durationArg(t, d, d.CmdArgs[0]))
	case "sync-known":
		var desired []*v1.Pod
		for _, a := range d.CmdArgs {
			p := e.pods[a.Key]
			if p == nil {
				p = &v1.Pod{}
				p.UID = types.UID(a.Key)
			}
			desired = append(desired, p)
		}
		report := e.w.SyncKnownPods(desired)
		synctest.Wait()
		e.print(&out, e.observed(), true)
		e.printReport(&out, report)
		return result(&out)
	case "window":
		uid := types.UID(e.name(t, d))
		w := e.w
		e.printWindow(&out, uid, windowAnswers{
			knownTerminated:       w.IsPodKnownTerminated(uid),
			couldRun:              w.CouldHaveRunningContainers(uid),
			finished:              w.ShouldPodBeFinished(uid),
			termRequested:         w.IsPodTerminationRequested(uid),
			containersTerminating: w.ShouldPodContainersBeTerminating(uid),
			runtimeRemovable:      w.ShouldPodRuntimeBeRemoved(uid),
			contentRemovable:      w.ShouldPodContentBeRemoved(uid),
		}, w.IsPodForMirrorPodTerminatingByFullName)
		return result(&out)
	case "info":
		info, ok := e.w.Pod(types.UID(e.name(t, d)))
		if !ok {
			return "absent"
		}
		e.checkPods(t, d, info)
		e.printInfo(&out, info)
		return result(&out)
	case "shutdown":
		e.shutdown()
		sortMoves = true
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	synctest.Wait()
	e.printEntered(&out)
	e.print(&out, e.observed(), sortMoves)
	return result(&out)
}

// checkPods requires that Pods agrees with Pod for the pod info shows.
func (e *driverEnv) checkPods(t *testing.T, d *datadriven.TestData, info PodInfo) {
	for _, p := range e.w.Pods() {
		if p.UID == info.UID {
			if fmt.Sprint(p) != fmt.Sprint(info) {
				d.Fatalf(t, "Pods shows %+v, Pod %+v", p, info)
			}
			return
		}
	}
	d.Fatalf(t, "Pods does not show %s", info.UID)
}
