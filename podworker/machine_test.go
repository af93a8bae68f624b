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

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// TestMachine drives the state machine alone — no goroutine, no lock, no
// hook — through the interaction scripts in testdata/*.txt, in the manner
// of etcd raft's interaction tests. Each command is one call of the
// machine (or a step of the fake clock); its output is every effect the
// call returned, in order, so the scripts read as the engine's behaviour
// step by step. Run with -rewrite to regenerate the expected output after
// an intended change, and read the diff.
//
// The commands (pods are named by their UID, in namespace "ns"):
//
//	config [resync=D] [backoff=D] [max-backoff=D] [slow-warning=D]
//	    a new machine (defaults 1m, 1s, 20s, 1m; jitter off)
//	create|update|sync P [static=NAME] [phase=Succeeded|Failed]
//	    [deleted=GRACE] [grace=SPEC] [mirror] [running-pod=UID]
//	    UpdatePod with a new version of P (static: a static pod named NAME;
//	    running-pod: a RunningPod of UID given alongside, which UpdatePod
//	    accepts and the engine ignores)
//	kill P [grace=N] [evict] [ch=NAME]... [status-fn] [static=NAME]
//	    a SyncPodKill update (ch: a CompletedCh the script names)
//	kill-runtime P    a kill of a pod known only from the runtime
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
//	detach P ch=NAME  a KillPod gave up waiting
//	sizes             what the machine holds: records, heap entries (live
//	                  or stale), ready records, static full names
//	shutdown          Run shuts down
//
// The scripts are testdata/*.txt; testdata's subdirectories hold other
// things (the fuzzer's corpus).
func TestMachine(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, path := range scripts {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			e := newMachineEnv(t, machineEnvConfig{})
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return e.handle(t, d)
			})
		})
	}
}

func (e *machineEnv) handle(t *testing.T, d *datadriven.TestData) string {
	var fx effects
	var out strings.Builder
	switch d.Cmd {
	case "config":
		var c machineEnvConfig
		for _, a := range d.CmdArgs {
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
		*e = *newMachineEnv(t, c)
		return "ok"
	case "create", "update", "sync":
		ut := map[string]UpdateType{"create": SyncPodCreate, "update": SyncPodUpdate, "sync": SyncPodSync}[d.Cmd]
		pod := e.newPod(t, d)
		u := update{updateType: ut, pod: pod}
		if d.HasArg("mirror") {
			mp := pod.DeepCopy()
			mp.UID = pod.UID + "-mirror"
			u.mirror = mp
		}
		if d.HasArg("running-pod") {
			var uid string
			d.ScanArgs(t, "running-pod", &uid)
			u.runningPod = &RuntimePod{UID: types.UID(uid), Namespace: "ns", Name: uid}
		}
		e.m.update(u, killRequest{}, &fx)
	case "kill":
		name := e.name(t, d)
		pod := e.pods[name]
		if pod == nil {
			pod = e.newPod(t, d)
		}
		var k killRequest
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
				ch := make(chan struct{})
				e.chans[a.SingleVal(t)] = ch
				if k.chans[0] == nil {
					k.chans[0] = ch
				} else {
					k.chans[1] = ch
				}
			case "status-fn":
				k.statusFn = func(*v1.PodStatus) {}
			default:
				d.Fatalf(t, "unknown kill argument %q", a.Key)
			}
		}
		e.m.update(update{updateType: SyncPodKill, pod: pod}, k, &fx)
	case "kill-runtime":
		name := e.name(t, d)
		rp := &RuntimePod{UID: types.UID(name), Namespace: "ns", Name: name}
		if p := e.pods[name]; p != nil {
			rp.Name = p.Name
		}
		e.m.update(update{updateType: SyncPodKill, runningPod: rp}, killRequest{}, &fx)
	case "resync":
		if !e.m.nudge(types.UID(e.name(t, d)), &fx) {
			out.WriteString("refused\n")
		}
	case "next":
		e.next(&out, &fx)
	case "run":
		for steps := 0; ; steps++ {
			if steps > 100 {
				d.Fatalf(t, "run did not settle in 100 hook calls")
			}
			var step effects
			c, ok := e.m.next(&step)
			if ok {
				e.printCall(&out, c)
			}
			e.print(&out, &step)
			if !ok {
				break
			}
			step = effects{}
			e.m.complete(&c, false, nil, &step)
			e.print(&out, &step)
		}
		return e.result(&out)
	case "done":
		name := e.name(t, d)
		c, ok := e.running[name]
		if !ok {
			d.Fatalf(t, "no hook of %s runs", name)
		}
		delete(e.running, name)
		var err error
		terminal := false
		for _, a := range d.CmdArgs[1:] {
			switch a.Key {
			case "err":
				err = errors.New("hook failed")
				if len(a.Vals) > 0 {
					switch v := a.SingleVal(t); v {
					case "canceled":
						err = context.Canceled
					case "panic":
						err = &panicError{value: "boom"}
					case "network":
						err = errors.New("network is not ready: cni plugin not initialized")
					default:
						d.Fatalf(t, "unknown error %q (canceled, panic, network)", v)
					}
				}
			case "terminal":
				terminal = true
			case "retry-after":
				err = RetryAfter(errors.New("not yet"), durationArg(t, d, a))
			default:
				d.Fatalf(t, "unknown done argument %q", a.Key)
			}
		}
		e.m.complete(&c, terminal, err, &fx)
	case "observe":
		c, ok := e.running[e.name(t, d)]
		if !ok {
			d.Fatalf(t, "no hook of %s runs", e.name(t, d))
		}
		c.ctx.Done()
		return "ok"
	case "tick":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "tick takes a duration")
		}
		e.clock.Step(durationArg(t, d, d.CmdArgs[0]))
		next, ok := e.m.fireDue(&fx)
		e.print(&out, &fx)
		if ok {
			fmt.Fprintf(&out, "next due %s\n", e.at(next))
		} else {
			out.WriteString("nothing due\n")
		}
		return e.result(&out)
	case "sync-known":
		desired := map[types.UID]struct{}{}
		for _, a := range d.CmdArgs {
			desired[types.UID(a.Key)] = struct{}{}
		}
		report := e.m.syncKnown(desired, &fx)
		e.sortByPod(&fx)
		e.print(&out, &fx)
		uids := make([]string, 0, len(report))
		for uid := range report {
			uids = append(uids, string(uid))
		}
		sort.Strings(uids)
		for _, uid := range uids {
			r := report[types.UID(uid)]
			fmt.Fprintf(&out, "report %s: %s%s%s%s\n", uid, r.Stage, flag(r.Orphan, " orphan"), flag(r.HasConfig, " has-config"), flag(r.Static, " static"))
		}
		return e.result(&out)
	case "window":
		uid := types.UID(e.name(t, d))
		m := e.m
		fmt.Fprintf(&out, "known-terminated=%v could-run=%v finished=%v term-requested=%v containers-terminating=%v runtime-removable=%v content-removable=%v\n",
			m.ask(uid, &qKnownTerminated), m.ask(uid, &qCouldHaveRunning), m.ask(uid, &qShouldBeFinished), m.ask(uid, &qTerminationRequested),
			m.ask(uid, &qContainersTerminating), m.ask(uid, &qRuntimeRemovable), m.ask(uid, &qContentRemovable))
		if p := e.pods[string(uid)]; p != nil && mirror.IsStaticPod(p) {
			fmt.Fprintf(&out, "mirror-pod-terminating(%s)=%v\n", mirror.PodFullName(p), m.mirrorPodTerminating(mirror.PodFullName(p)))
		}
		return e.result(&out)
	case "info":
		info, ok := e.m.info(types.UID(e.name(t, d)))
		if !ok {
			return "absent"
		}
		e.printInfo(&out, info)
		return e.result(&out)
	case "detach":
		var ch string
		d.ScanArgs(t, "ch", &ch)
		e.m.detach(types.UID(e.name(t, d)), e.chans[ch])
		return "ok"
	case "sizes":
		return fmt.Sprintf("records=%d timers=%d ready=%d static-names=%d", len(e.m.records), e.m.delayed.Len(), e.m.readyTerm.n+e.m.readySync.n, e.m.staticSlots())
	case "shutdown":
		e.m.shutdown(&fx)
		e.sortByPod(&fx)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	e.print(&out, &fx)
	return e.result(&out)
}
