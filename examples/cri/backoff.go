package cri

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// restartBackOff spaces out the restarts of a crashing container: the
// first restart is immediate, each further one waits twice as long as the
// one before (from initial up to max), and a container that ran for at
// least twice max before it exited starts over. It is keyed by pod UID and
// container name and is forgotten with the pod.
type restartBackOff struct {
	initial, max time.Duration

	mu sync.Mutex
	// pods holds, per pod UID and container name, the last restart.
	pods map[types.UID]map[string]*restartEntry
}

type restartEntry struct {
	// delay is how long after restartedAt the next restart may happen.
	delay       time.Duration
	restartedAt time.Time
}

func newRestartBackOff(initial, max time.Duration) *restartBackOff {
	return &restartBackOff{initial: initial, max: max, pods: make(map[types.UID]map[string]*restartEntry)}
}

// next is asked before restarting container name of pod uid, whose last
// instance ran for ranFor. It returns 0 and records the restart when the
// container may restart now, else how long is left to wait.
func (b *restartBackOff) next(uid types.UID, name string, now time.Time, ranFor time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	byName := b.pods[uid]
	if byName == nil {
		byName = make(map[string]*restartEntry)
		b.pods[uid] = byName
	}
	e := byName[name]
	if e != nil && ranFor >= 2*b.max {
		e = nil
	}
	switch {
	case e == nil:
		byName[name] = &restartEntry{delay: b.initial, restartedAt: now}
		return 0
	case now.Before(e.restartedAt.Add(e.delay)):
		return e.restartedAt.Add(e.delay).Sub(now)
	default:
		e.delay = min(2*e.delay, b.max)
		e.restartedAt = now
		return 0
	}
}

// forget drops everything known about pod uid.
func (b *restartBackOff) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pods, uid)
}
