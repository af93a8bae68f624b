package podworker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/mirror"
)

// The interaction scripts, testdata/*.txt, and what the two layers that run
// them share: the machine alone (TestMachine, machine_test.go) and the
// driver over it (TestDriver, driver_test.go), in the manner of etcd
// raft's interaction tests. Each command is one step of the engine (or of
// the fake clock); its output is every effect of the step, in order, so the
// scripts read as the engine's behaviour step by step. The machine's run
// writes the expected output (-rewrite regenerates it after an intended
// change: read the diff); the driver's run must produce the same, less the
// lines that only the machine sees (see observable).
//
// The commands (pods are named by their UID, in namespace "ns"):
//
//	config [machine-only] [resync=D] [backoff=D] [max-backoff=D] [slow-warning=D]
//	    a new engine (defaults 1m, 1s, 20s, 1m; jitter off). machine-only:
//	    the script from here to the next config is the machine's alone
//	    (values Options refuses, a delay the driver's timer loop acts on at
//	    once)
//	create|update|sync P [static=NAME] [phase=Succeeded|Failed]
//	    [deleted=GRACE] [grace=SPEC|none] [mirror] [running-pod=UID] [ch=NAME]
//	    UpdatePod with a new version of P (static: a static pod named NAME;
//	    grace: its spec's grace period, none for no value; running-pod: a
//	    RunningPod of UID, named orphaned-pod, given alongside, which
//	    UpdatePod accepts and the engine ignores; ch: a CompletedCh the
//	    script names, in the update's KillPodOptions)
//	kill P [grace=N] [evict] [ch=NAME] [status-fn] [static=NAME]
//	    a SyncPodKill update
//	kill-runtime P [name=NAME] [ch=NAME]
//	    a kill of a pod known only from the runtime (named NAME, else as
//	    the pod P the script knows, else P)
//	resync P          Resync
//	next              a worker takes the next hook call
//	run               next and done, until nothing is ready
//	done P [err[=canceled|panic|network]] [terminal] [retry-after=D]
//	    P's running hook returns
//	observe P         P's running hook listens to its context (Done)
//	tick D            the clock moves on D; due timers fire
//	sync-known P...   SyncKnownPods with the desired pods
//	window P          the window's answers for P
//	info P            P's snapshot
//	sizes             what the machine holds: records, heap entries (live
//	                  or stale), ready records, static full names (the
//	                  machine's alone)
//	shutdown          Run shuts down
//
// A hook call prints as "start P Hook ...": SyncPod's update type and pod
// version, the pod version of the other hooks, the grace period, whether
// the call carries a PodStatusFunc and asks the StatusSource whether
// anything runs (check-stopped, decision D4), and the hook's context.
//
// The scripts are testdata/*.txt; testdata's subdirectories hold other
// things (the fuzzer's corpus).

var scriptEpoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// scripts lists the interaction scripts.
func scripts(t *testing.T) []string {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no scripts in testdata")
	}
	return paths
}

func scriptName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".txt") }

// scriptConfig is a config command's.
type scriptConfig struct {
	resync, backOff, maxBackOff, slowWarning time.Duration
	machineOnly                              bool
}

func parseConfig(t *testing.T, d *datadriven.TestData) scriptConfig {
	var c scriptConfig
	for _, a := range d.CmdArgs {
		if a.Key == "machine-only" {
			c.machineOnly = true
			continue
		}
		v := durationArg(t, d, a)
		switch a.Key {
		case "resync":
			c.resync = v
		case "backoff":
			c.backOff = v
		case "max-backoff":
			c.maxBackOff = v
		case "slow-warning":
			c.slowWarning = v
		default:
			d.Fatalf(t, "unknown config %q", a.Key)
		}
	}
	return c.withDefaults()
}

func (c scriptConfig) withDefaults() scriptConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.resync, time.Minute)
	def(&c.backOff, time.Second)
	def(&c.maxBackOff, 20*time.Second)
	def(&c.slowWarning, time.Minute)
	return c
}

// scriptWorld is what a script's run knows beside the engine: the clock,
// the pods it made, and names for channels and hook contexts.
type scriptWorld struct {
	clock   *testingclock.FakeClock
	pods    map[string]*v1.Pod
	version int
	chans   map[string]chan struct{}
	// chanPod is the pod each named channel was given with.
	chanPod map[string]types.UID
	ctxs    map[context.Context]string
}

func newScriptWorld() scriptWorld {
	return scriptWorld{
		clock:   testingclock.NewFakeClock(scriptEpoch),
		pods:    map[string]*v1.Pod{},
		chans:   map[string]chan struct{}{},
		chanPod: map[string]types.UID{},
		ctxs:    map[context.Context]string{},
	}
}

func (w *scriptWorld) name(t *testing.T, d *datadriven.TestData) string {
	if len(d.CmdArgs) == 0 || len(d.CmdArgs[0].Vals) > 0 {
		d.Fatalf(t, "%s needs a pod name first", d.Cmd)
	}
	return d.CmdArgs[0].Key
}

// newPod makes the next version of the pod the command names.
func (w *scriptWorld) newPod(t *testing.T, d *datadriven.TestData) *v1.Pod {
	name := w.name(t, d)
	w.version++
	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(name), Namespace: "ns", Name: name, ResourceVersion: strconv.Itoa(w.version)},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
	if old := w.pods[name]; old != nil {
		pod.Name, pod.Annotations = old.Name, old.Annotations
		pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = old.DeletionTimestamp, old.DeletionGracePeriodSeconds
		pod.Status.Phase = old.Status.Phase
		pod.Spec.TerminationGracePeriodSeconds = old.Spec.TerminationGracePeriodSeconds
	}
	for _, a := range d.CmdArgs[1:] {
		if d.Cmd == "kill" && a.Key != "static" {
			continue // the kill's own arguments
		}
		switch a.Key {
		case "static":
			if d.Cmd == "kill" && w.pods[name] != nil {
				d.Fatalf(t, "kill takes static only for a pod it sees first")
			}
			pod.Name = a.SingleVal(t)
			pod.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: mirror.FileSource}
		case "phase":
			pod.Status.Phase = v1.PodPhase(a.SingleVal(t))
		case "deleted":
			g, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
			if err != nil {
				d.Fatalf(t, "deleted: %v", err)
			}
			now := metav1.NewTime(w.clock.Now())
			pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &g
		case "grace":
			if a.SingleVal(t) == "none" {
				pod.Spec.TerminationGracePeriodSeconds = nil
				break
			}
			g, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
			if err != nil {
				d.Fatalf(t, "grace: %v", err)
			}
			pod.Spec.TerminationGracePeriodSeconds = &g
		case "mirror", "running-pod", "ch":
		default:
			d.Fatalf(t, "unknown pod argument %q", a.Key)
		}
	}
	w.pods[name] = pod
	return pod
}

// scriptUpdate is the update a create, update or sync command makes, and
// the channel it hands over ("" for none).
func (w *scriptWorld) scriptUpdate(t *testing.T, d *datadriven.TestData) (update, string) {
	ut := map[string]UpdateType{"create": SyncPodCreate, "update": SyncPodUpdate, "sync": SyncPodSync}[d.Cmd]
	pod := w.newPod(t, d)
	u := update{updateType: ut, pod: pod}
	if d.HasArg("mirror") {
		mp := pod.DeepCopy()
		mp.UID = pod.UID + "-mirror"
		u.mirror = mp
	}
	if d.HasArg("running-pod") {
		var uid string
		d.ScanArgs(t, "running-pod", &uid)
		u.runningPod = &RuntimePod{UID: types.UID(uid), Namespace: "ns", Name: "orphaned-pod"}
	}
	return u, w.newChan(t, d, pod.UID)
}

// newChan makes the channel a command names with ch=NAME, if any, given
// with the pod uid.
func (w *scriptWorld) newChan(t *testing.T, d *datadriven.TestData, uid types.UID) string {
	var name string
	if !d.MaybeScanArgs(t, "ch", &name) {
		return ""
	}
	w.chans[name] = make(chan struct{})
	w.chanPod[name] = uid
	return name
}

// scriptKill is what a kill command asks for, and of which pod.
type scriptKill struct {
	pod      *v1.Pod
	override *int64
	evict    bool
	ch       string // the named channel, "" for none
	statusFn func(*v1.PodStatus)
}

func (w *scriptWorld) parseKill(t *testing.T, d *datadriven.TestData) scriptKill {
	name := w.name(t, d)
	k := scriptKill{pod: w.pods[name]}
	if k.pod == nil {
		k.pod = w.newPod(t, d)
	}
	for _, a := range d.CmdArgs[1:] {
		switch a.Key {
		case "static":
		case "grace":
			g, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
			if err != nil {
				d.Fatalf(t, "grace: %v", err)
			}
			k.override = &g
		case "evict":
			k.evict = true
		case "ch":
			k.ch = w.newChan(t, d, k.pod.UID)
		case "status-fn":
			k.statusFn = func(*v1.PodStatus) {}
		default:
			d.Fatalf(t, "unknown kill argument %q", a.Key)
		}
	}
	return k
}

// runtimePod is the pod a kill-runtime command names, and the channel it
// hands over ("" for none).
func (w *scriptWorld) runtimePod(t *testing.T, d *datadriven.TestData) (*RuntimePod, string) {
	name := w.name(t, d)
	rp := &RuntimePod{UID: types.UID(name), Namespace: "ns", Name: name}
	if p := w.pods[name]; p != nil {
		rp.Name = p.Name
	}
	for _, a := range d.CmdArgs[1:] {
		switch a.Key {
		case "name":
			rp.Name = a.SingleVal(t)
		case "ch":
		default:
			d.Fatalf(t, "unknown kill-runtime argument %q", a.Key)
		}
	}
	return rp, w.newChan(t, d, rp.UID)
}

// scriptDone is how a done command says the hook returns.
type scriptDone struct {
	terminal bool
	err      error
	// panic: the hook panics (with "boom"); err is then what the engine
	// makes of it.
	panic bool
}

func parseDone(t *testing.T, d *datadriven.TestData) scriptDone {
	var r scriptDone
	for _, a := range d.CmdArgs[1:] {
		switch a.Key {
		case "err":
			r.err = errors.New("hook failed")
			if len(a.Vals) > 0 {
				switch v := a.SingleVal(t); v {
				case "canceled":
					r.err = context.Canceled
				case "panic":
					r.err, r.panic = &panicError{value: "boom"}, true
				case "network":
					r.err = errors.New("network is not ready: cni plugin not initialized")
				default:
					d.Fatalf(t, "unknown error %q (canceled, panic, network)", v)
				}
			}
		case "terminal":
			r.terminal = true
		case "retry-after":
			r.err = RetryAfter(errors.New("not yet"), durationArg(t, d, a))
		default:
			d.Fatalf(t, "unknown done argument %q", a.Key)
		}
	}
	return r
}

// scriptCall is a hook call as a script prints it, whichever layer made
// it.
type scriptCall struct {
	uid          types.UID
	hook         Hook
	ctx          context.Context
	updateType   UpdateType
	pod, mirror  *v1.Pod
	runningPod   RuntimePod
	grace        int64
	statusFn     bool
	checkStopped bool
}

func (w *scriptWorld) printCall(out *strings.Builder, c scriptCall) {
	if _, seen := w.ctxs[c.ctx]; !seen {
		w.ctxs[c.ctx] = fmt.Sprintf("%s's context #%d", c.uid, len(w.ctxs)+1)
	}
	fmt.Fprintf(out, "start %s %s", c.uid, c.hook)
	switch c.hook {
	case HookSyncPod:
		fmt.Fprintf(out, " %s v%s", c.updateType, c.pod.ResourceVersion)
		if c.mirror != nil {
			out.WriteString(" with mirror")
		}
	case HookSyncTerminatingPod:
		fmt.Fprintf(out, " v%s grace=%d", c.pod.ResourceVersion, c.grace)
		if c.statusFn {
			out.WriteString(" status-fn")
		}
		if c.checkStopped {
			out.WriteString(" check-stopped")
		}
	case HookSyncTerminatedPod:
		fmt.Fprintf(out, " v%s", c.pod.ResourceVersion)
	case HookSyncTerminatingRuntimePod:
		fmt.Fprintf(out, " %s/%s", c.runningPod.Namespace, c.runningPod.Name)
	}
	fmt.Fprintf(out, " (%s)", w.ctxs[c.ctx])
	out.WriteString("\n")
}

// scriptStep is what one step did, as a script prints it.
type scriptStep struct {
	moves   []move
	closes  []scriptClose
	cancels []string
	slow    []slowHook
	// ready and wake are the machine's alone: the driver acts on them.
	ready, wake bool
}

type scriptClose struct {
	ch  string
	uid types.UID
}

// print writes the step's effects, one a line: stage changes in the order
// they happened (by pod, keeping each pod's order, when sortMoves: a call
// that walks every record sees them in map order), then closed channels
// and cancelled contexts, sorted (the driver sees them close, not in which
// order).
func (w *scriptWorld) print(out *strings.Builder, s scriptStep, sortMoves bool) {
	if sortMoves {
		sort.SliceStable(s.moves, func(i, j int) bool { return s.moves[i].uid < s.moves[j].uid })
	}
	for _, mv := range s.moves {
		fmt.Fprintf(out, "%s: %s -> %s\n", mv.uid, mv.from, mv.to)
	}
	sort.Slice(s.closes, func(i, j int) bool {
		a, b := s.closes[i], s.closes[j]
		return a.uid < b.uid || a.uid == b.uid && a.ch < b.ch
	})
	for _, c := range s.closes {
		fmt.Fprintf(out, "close %s (%s)\n", c.ch, c.uid)
	}
	sort.Strings(s.cancels)
	for _, c := range s.cancels {
		fmt.Fprintf(out, "cancel %s\n", c)
	}
	for _, sl := range s.slow {
		fmt.Fprintf(out, "slow %s %s: still running %s after its context was cancelled%s\n", sl.uid, sl.hook, sl.cancelled, flag(sl.first, " (first report)"))
	}
	if s.ready {
		out.WriteString("ready\n")
	}
	if s.wake {
		out.WriteString("wake timers\n")
	}
}

func (w *scriptWorld) chanName(ch chan<- struct{}) string {
	for name, c := range w.chans {
		if chan<- struct{}(c) == ch {
			return name
		}
	}
	return "unnamed channel"
}

// windowAnswers are the window's answers for one UID, in the order of
// the package doc's table.
type windowAnswers struct {
	knownTerminated, couldRun, finished, termRequested, containersTerminating, runtimeRemovable, contentRemovable bool
}

// printWindow writes the window's answers for uid; mirrorTerminating
// answers for a static pod's full name.
func (w *scriptWorld) printWindow(out *strings.Builder, uid types.UID, a windowAnswers, mirrorTerminating func(fullName string) bool) {
	fmt.Fprintf(out, "known-terminated=%v could-run=%v finished=%v term-requested=%v containers-terminating=%v runtime-removable=%v content-removable=%v\n",
		a.knownTerminated, a.couldRun, a.finished, a.termRequested, a.containersTerminating, a.runtimeRemovable, a.contentRemovable)
	if p := w.pods[string(uid)]; p != nil && mirror.IsStaticPod(p) {
		fmt.Fprintf(out, "mirror-pod-terminating(%s)=%v\n", mirror.PodFullName(p), mirrorTerminating(mirror.PodFullName(p)))
	}
}

func (w *scriptWorld) printReport(out *strings.Builder, report map[types.UID]WorkerReport) {
	uids := make([]string, 0, len(report))
	for uid := range report {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		r := report[types.UID(uid)]
		fmt.Fprintf(out, "report %s: %s%s%s%s\n", uid, r.Stage, flag(r.Orphan, " orphan"), flag(r.HasConfig, " has-config"), flag(r.Static, " static"))
	}
}

func (w *scriptWorld) printInfo(out *strings.Builder, info PodInfo) {
	fmt.Fprintf(out, "%s %s stage=%s", info.UID, info.FullName, info.Stage)
	for _, f := range []struct {
		on   bool
		name string
	}{
		{info.Started, "started"}, {info.TerminationRequested, "termination-requested"},
		{info.TerminationStarted, "termination-started"}, {info.Finished, "finished"},
		{info.Deleted, "deleted"}, {info.Evicted, "evicted"}, {info.RestartRequested, "restart-requested"},
		{info.Static, "static"}, {info.RuntimeOnly, "runtime-only"}, {info.Working, "working"},
	} {
		if f.on {
			out.WriteString(" " + f.name)
		}
	}
	out.WriteString("\n")
	if info.GracePeriod != 0 {
		fmt.Fprintf(out, "grace=%d\n", info.GracePeriod)
	}
	if info.Pod != nil {
		fmt.Fprintf(out, "pod v%s\n", info.Pod.ResourceVersion)
	}
	if !info.LastSyncTime.IsZero() {
		fmt.Fprintf(out, "last sync %s, error %v, failures %d\n", at(info.LastSyncTime), info.LastSyncError, info.ConsecutiveFailures)
	}
	if !info.NextSyncTime.IsZero() {
		fmt.Fprintf(out, "next sync %s\n", at(info.NextSyncTime))
	}
}

// at writes a time as an offset from the script's start.
func at(t time.Time) string { return "t+" + t.Sub(scriptEpoch).String() }

func flag(on bool, s string) string {
	if on {
		return s
	}
	return ""
}

func result(out *strings.Builder) string {
	if out.Len() == 0 {
		return "no effects"
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// machineOnlyLines are the lines of a step's output that only the machine
// sees: that work is ready, that the timer loop must look again, and when
// the next timer is due. The driver acts on them by itself.
func machineOnlyLine(l string) bool {
	return l == "ready" || l == "wake timers" || l == "nothing due" || strings.HasPrefix(l, "next due ")
}

// observable is the part of the machine's expected output the driver must
// produce.
func observable(expected string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSuffix(expected, "\n"), "\n") {
		if !machineOnlyLine(l) {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return "no effects"
	}
	return strings.Join(keep, "\n")
}

func durationArg(t *testing.T, d *datadriven.TestData, a datadriven.CmdArg) time.Duration {
	v := a.Key
	if len(a.Vals) > 0 {
		v = a.SingleVal(t)
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		d.Fatalf(t, "%s: %v", a.Key, err)
	}
	return dur
}
