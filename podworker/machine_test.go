package podworker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"k8s.io/apimachinery/pkg/types"
)

// TestMachine drives the state machine alone — no goroutine, no lock, no
// hook — through the interaction scripts in testdata/*.txt (see
// script_test.go for the commands). Its output is the scripts' expected
// output: every effect of each call, the machine's own (ready, wake timers,
// next due) included. Run with -rewrite to regenerate it after an intended
// change, and read the diff; TestDriver then checks the driver against it.
func TestMachine(t *testing.T) {
	for _, path := range scripts(t) {
		t.Run(scriptName(path), func(t *testing.T) {
			e := newMachineEnv(scriptConfig{}.withDefaults())
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return e.handle(t, d)
			})
		})
	}
}

func (e *machineEnv) handle(t *testing.T, d *datadriven.TestData) string {
	var fx effects
	var out strings.Builder
	sortMoves := false
	switch d.Cmd {
	case "config":
		*e = *newMachineEnv(parseConfig(t, d))
		return "ok"
	case "create", "update", "sync":
		u, ch := e.scriptUpdate(t, d)
		e.m.update(u, e.killRequest(ch), &fx)
	case "kill":
		k := e.parseKill(t, d)
		kr := e.killRequest(k.ch)
		kr.override, kr.evict, kr.statusFn = k.override, k.evict, k.statusFn
		e.m.update(update{updateType: SyncPodKill, pod: k.pod}, kr, &fx)
	case "kill-runtime":
		rp, ch := e.runtimePod(t, d)
		e.m.update(update{updateType: SyncPodKill, runningPod: rp}, e.killRequest(ch), &fx)
	case "resync":
		if !e.m.nudge(types.UID(e.name(t, d)), &fx) {
			out.WriteString("refused\n")
		}
	case "next":
		c, ok := e.m.next(&fx)
		if !ok {
			out.WriteString("nothing to run\n")
			break
		}
		e.printCall(&out, e.call(c))
		e.running[string(c.rec.uid)] = c
	case "run":
		for steps := 0; ; steps++ {
			if steps > 100 {
				d.Fatalf(t, "run did not settle in 100 hook calls")
			}
			var step effects
			c, ok := e.m.next(&step)
			if ok {
				e.printCall(&out, e.call(c))
			}
			e.print(&out, e.step(&step), false)
			if !ok {
				break
			}
			step = effects{}
			e.m.complete(&c, false, nil, &step)
			e.print(&out, e.step(&step), false)
		}
		return result(&out)
	case "done":
		name := e.name(t, d)
		c, ok := e.running[name]
		if !ok {
			d.Fatalf(t, "no hook of %s runs", name)
		}
		delete(e.running, name)
		r := parseDone(t, d)
		e.m.complete(&c, r.terminal, r.err, &fx)
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
		e.print(&out, e.step(&fx), false)
		if ok {
			fmt.Fprintf(&out, "next due %s\n", at(next))
		} else {
			out.WriteString("nothing due\n")
		}
		return result(&out)
	case "sync-known":
		desired := map[types.UID]struct{}{}
		for _, a := range d.CmdArgs {
			desired[types.UID(a.Key)] = struct{}{}
		}
		report := e.m.syncKnown(desired, &fx)
		e.print(&out, e.step(&fx), true)
		e.printReport(&out, report)
		return result(&out)
	case "window":
		name := e.name(t, d)
		e.printWindow(&out, types.UID(name), e.window(name), e.m.mirrorPodTerminating)
		return result(&out)
	case "info":
		info, ok := e.m.info(types.UID(e.name(t, d)))
		if !ok {
			return "absent"
		}
		e.printInfo(&out, info)
		return result(&out)
	case "sizes":
		return fmt.Sprintf("records=%d timers=%d ready=%d static-names=%d", len(e.m.records), e.m.delayed.Len(), e.m.readyTerm.n+e.m.readySync.n, e.m.staticSlots())
	case "shutdown":
		e.m.shutdown(&fx)
		sortMoves = true
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	e.print(&out, e.step(&fx), sortMoves)
	return result(&out)
}
