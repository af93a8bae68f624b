//go:build linux

// Package osthread runs work on an operating-system thread of its own that
// ends with the work: for work that changes what its thread is (its mount
// or network namespace, its filesystem context, its cgroup v1 membership,
// its credentials), which nothing else of the program may run with
// afterwards.
//
// The Go runtime ends the thread of a goroutine that exits while locked to
// it (runtime.LockOSThread), except the program's main thread, which it
// wedges instead; the main thread is also the one whose cgroup v1 memory
// cgroup the whole process's memory is charged to. So the work never runs
// there: should the locked goroutine start on the main thread, it holds
// that thread while a second goroutine, which then cannot run there, does
// the work.
package osthread

import (
	"runtime"
	"syscall"
)

// Discarded runs f on a goroutine locked to an OS thread that ends when f
// returns, and that is not the main thread. It does not wait for f. It may
// be called from any goroutine; f may block (its thread then sleeps, and
// the program's other goroutines run elsewhere).
func Discarded(f func()) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() != syscall.Getpid() {
			// Never unlocked: the thread ends with this goroutine.
			f()
			return
		}
		ran := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer close(ran)
			f()
		}()
		<-ran
		runtime.UnlockOSThread()
	}()
}
