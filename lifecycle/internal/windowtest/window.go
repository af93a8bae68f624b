// Package windowtest fakes the part of the pod workers' window that the
// per-pod loops (probes, active deadlines) ask, for their tests.
package windowtest

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Window answers CouldHaveRunningContainers and IsPodTerminationRequested
// as the pod workers would for a pod in the stage a test sets. Every UID
// runs until told otherwise. It is safe for concurrent use.
type Window struct {
	mu          sync.Mutex
	terminating map[types.UID]bool // termination requested, containers may still run
	stopped     map[types.UID]bool // containers stopped, or the UID unknown to synced workers
}

// New returns a Window in which every pod runs.
func New() *Window {
	return &Window{terminating: map[types.UID]bool{}, stopped: map[types.UID]bool{}}
}

// Terminate makes uid's termination requested; its containers may still
// run.
func (w *Window) Terminate(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.terminating[uid] = true
}

// Stop makes uid a pod that cannot have running containers (terminated,
// or unknown to the workers once synced).
func (w *Window) Stop(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped[uid] = true
}

// Run makes uid a running pod again (a new pod of that UID, in a test).
func (w *Window) Run(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.terminating, uid)
	delete(w.stopped, uid)
}

// CouldHaveRunningContainers is false once Stop was called for uid.
func (w *Window) CouldHaveRunningContainers(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.stopped[uid]
}

// IsPodTerminationRequested is true once Terminate or Stop was called for
// uid.
func (w *Window) IsPodTerminationRequested(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terminating[uid] || w.stopped[uid]
}
