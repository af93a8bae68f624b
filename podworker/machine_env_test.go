package podworker

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The world the machine's run of the interaction scripts happens in (see
// TestMachine): the machine, and the hook calls it handed out.

// machineEnv is one machine and what the script did with it.
type machineEnv struct {
	scriptWorld
	m       *machine
	running map[string]hookCall
}

func newMachineEnv(c scriptConfig) *machineEnv {
	e := &machineEnv{scriptWorld: newScriptWorld(), running: map[string]hookCall{}}
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

// call is c as a script prints it.
func (e *machineEnv) call(c hookCall) scriptCall {
	return scriptCall{
		uid:          c.rec.uid,
		hook:         c.hook,
		ctx:          c.ctx,
		updateType:   c.updateType,
		pod:          c.pod,
		mirror:       c.mirror,
		runningPod:   c.runningPod,
		grace:        c.grace,
		statusFn:     c.statusFn != nil,
		checkStopped: c.checkStopped,
	}
}

// step is fx as a script prints it.
func (e *machineEnv) step(fx *effects) scriptStep {
	var s scriptStep
	for i := range fx.moves.len() {
		s.moves = append(s.moves, fx.moves.at(i))
	}
	for i := range fx.closes.len() {
		c := fx.closes.at(i)
		s.closes = append(s.closes, scriptClose{ch: e.chanName(c.ch), uid: c.rec.uid})
	}
	for i := range fx.cancels.len() {
		s.cancels = append(s.cancels, e.ctxs[fx.cancels.at(i)])
	}
	s.slow = fx.slow
	s.ready, s.wake = fx.ready, fx.wake
	return s
}

func (e *machineEnv) window(uid string) windowAnswers {
	m := e.m
	u := types.UID(uid)
	return windowAnswers{
		knownTerminated:       m.ask(u, &qKnownTerminated),
		couldRun:              m.ask(u, &qCouldHaveRunning),
		finished:              m.ask(u, &qShouldBeFinished),
		termRequested:         m.ask(u, &qTerminationRequested),
		containersTerminating: m.ask(u, &qContainersTerminating),
		runtimeRemovable:      m.ask(u, &qRuntimeRemovable),
		contentRemovable:      m.ask(u, &qContentRemovable),
	}
}

// killRequest hands over the named channel ch ("" for none).
func (e *machineEnv) killRequest(ch string) killRequest {
	var k killRequest
	if ch != "" {
		k.chans[0] = e.chans[ch]
	}
	return k
}
