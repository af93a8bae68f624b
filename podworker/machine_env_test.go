package podworker

import (
	"fmt"
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

// The world the machine's interaction scripts run in (see TestMachine):
// pods by name, the hook calls handed out, named channels and contexts,
// and how effects print.

var machineEpoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

type machineEnvConfig struct {
	resync, backOff, maxBackOff, slowWarning time.Duration
}

// machineEnv is the world around one machine: its clock, the pods it was
// given, the hook calls it handed out, and names for channels.
type machineEnv struct {
	clock   *testingclock.FakeClock
	m       *machine
	pods    map[string]*v1.Pod
	version int
	running map[string]hookCall
	chans   map[string]chan struct{}
	ctxs    map[*hookCtx]string
}

func newMachineEnv(t *testing.T, c machineEnvConfig) *machineEnv {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.resync, time.Minute)
	def(&c.backOff, time.Second)
	def(&c.maxBackOff, 20*time.Second)
	def(&c.slowWarning, time.Minute)
	e := &machineEnv{
		clock:   testingclock.NewFakeClock(machineEpoch),
		pods:    map[string]*v1.Pod{},
		running: map[string]hookCall{},
		chans:   map[string]chan struct{}{},
		ctxs:    map[*hookCtx]string{},
	}
	e.m = newMachine(machineConfig{
		clock:       e.clock,
		resync:      c.resync,
		backOff:     c.backOff,
		maxBackOff:  c.maxBackOff,
		slowWarning: c.slowWarning,
		jitter:      func(d time.Duration) time.Duration { return d },
	})
	return e
}

func (e *machineEnv) result(out *strings.Builder) string {
	if out.Len() == 0 {
		return "no effects"
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func (e *machineEnv) name(t *testing.T, d *datadriven.TestData) string {
	if len(d.CmdArgs) == 0 || len(d.CmdArgs[0].Vals) > 0 {
		d.Fatalf(t, "%s needs a pod name first", d.Cmd)
	}
	return d.CmdArgs[0].Key
}

// newPod makes the next version of the pod the command names.
func (e *machineEnv) newPod(t *testing.T, d *datadriven.TestData) *v1.Pod {
	name := e.name(t, d)
	e.version++
	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(name), Namespace: "ns", Name: name, ResourceVersion: strconv.Itoa(e.version)},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
	if old := e.pods[name]; old != nil {
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
			if d.Cmd == "kill" && e.pods[name] != nil {
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
			now := metav1.NewTime(e.clock.Now())
			pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &g
		case "grace":
			g, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
			if err != nil {
				d.Fatalf(t, "grace: %v", err)
			}
			pod.Spec.TerminationGracePeriodSeconds = &g
		case "mirror", "running-pod":
		default:
			d.Fatalf(t, "unknown pod argument %q", a.Key)
		}
	}
	e.pods[name] = pod
	return pod
}

func (e *machineEnv) next(out *strings.Builder, fx *effects) {
	c, ok := e.m.next(fx)
	if !ok {
		out.WriteString("nothing to run\n")
		return
	}
	e.printCall(out, c)
	e.running[string(c.rec.uid)] = c
}

func (e *machineEnv) printCall(out *strings.Builder, c hookCall) {
	uid := string(c.rec.uid)
	if _, seen := e.ctxs[c.ctx]; !seen {
		e.ctxs[c.ctx] = fmt.Sprintf("%s's context #%d", uid, len(e.ctxs)+1)
	}
	fmt.Fprintf(out, "start %s %s", uid, c.hook)
	switch c.hook {
	case HookSyncPod:
		fmt.Fprintf(out, " %s v%s", c.updateType, c.pod.ResourceVersion)
		if c.mirror != nil {
			out.WriteString(" with mirror")
		}
	case HookSyncTerminatingPod:
		fmt.Fprintf(out, " grace=%d", c.grace)
		if c.statusFn != nil {
			out.WriteString(" status-fn")
		}
		if c.checkStopped {
			out.WriteString(" check-stopped")
		}
	case HookSyncTerminatingRuntimePod:
		fmt.Fprintf(out, " %s/%s", c.runningPod.Namespace, c.runningPod.Name)
	}
	fmt.Fprintf(out, " (%s)", e.ctxs[c.ctx])
	out.WriteString("\n")
}

// print writes fx's effects, one a line, in order within each kind.
func (e *machineEnv) print(out *strings.Builder, fx *effects) {
	for i := range fx.moves.len() {
		mv := fx.moves.at(i)
		fmt.Fprintf(out, "%s: %s -> %s\n", mv.uid, mv.from, mv.to)
	}
	for i := range fx.closes.len() {
		c := fx.closes.at(i)
		fmt.Fprintf(out, "close %s (%s)\n", e.chanName(c.ch), c.rec.uid)
	}
	for i := range fx.cancels.len() {
		fmt.Fprintf(out, "cancel %s\n", e.ctxs[fx.cancels.at(i)])
	}
	for _, s := range fx.slow {
		fmt.Fprintf(out, "slow %s %s: still running %s after its context was cancelled%s\n", s.uid, s.hook, s.cancelled, flag(s.first, " (first report)"))
	}
	if fx.ready {
		out.WriteString("ready\n")
	}
	if fx.wake {
		out.WriteString("wake timers\n")
	}
}

func (e *machineEnv) chanName(ch chan<- struct{}) string {
	for name, c := range e.chans {
		if chan<- struct{}(c) == ch {
			return name
		}
	}
	return "unnamed channel"
}

func (e *machineEnv) printInfo(out *strings.Builder, info PodInfo) {
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
		fmt.Fprintf(out, "last sync %s, error %v, failures %d\n", e.at(info.LastSyncTime), info.LastSyncError, info.ConsecutiveFailures)
	}
	if !info.NextSyncTime.IsZero() {
		fmt.Fprintf(out, "next sync %s\n", e.at(info.NextSyncTime))
	}
}

// at writes a time as an offset from the script's start.
func (e *machineEnv) at(t time.Time) string { return "t+" + t.Sub(machineEpoch).String() }

func flag(on bool, s string) string {
	if on {
		return s
	}
	return ""
}

// sortByPod orders effects by pod (keeping each pod's in order): calls
// that walk every record see them in map order.
func (e *machineEnv) sortByPod(fx *effects) {
	fx.moves = sorted(fx.moves, func(a, b move) bool { return a.uid < b.uid })
	fx.closes = sorted(fx.closes, func(a, b closeReq) bool { return a.rec.uid < b.rec.uid })
	fx.cancels = sorted(fx.cancels, func(a, b *hookCtx) bool { return e.ctxs[a] < e.ctxs[b] })
}

func sorted[T any](b smallBuf[T], less func(a, b T) bool) smallBuf[T] {
	items := make([]T, b.len())
	for i := range items {
		items[i] = b.at(i)
	}
	sort.SliceStable(items, func(i, j int) bool { return less(items[i], items[j]) })
	var out smallBuf[T]
	for _, v := range items {
		out.add(v)
	}
	return out
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
