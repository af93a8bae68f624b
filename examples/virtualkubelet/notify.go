package virtualkubelet

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/podkit/podkit/internal/podstatus"
)

// NotifyPods registers the callback that status changes are sent to
// (virtual-kubelet's PodController registers its own when it starts). It
// returns at once. Statuses computed before it was called are sent once it
// is. The callback is called from the provider's notifier goroutines (see
// Options.NotifyWorkers), never for one pod twice at a time, with a pod the
// callback may keep; it may block.
//
// Each pod's newest status is sent, intermediate ones may be skipped. A
// final status (every container stopped) is sent again, with backoff,
// until the API server shows the pod in a terminal phase or no longer has
// it (Options.Pods), because virtual-kubelet drops a notification it cannot
// place or whose write keeps failing. A status is never sent for a pod
// whose API object is gone: virtual-kubelet keys notifications by name and
// would write it onto a same-named successor.
func (p *Provider) NotifyPods(_ context.Context, notify func(*v1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = notify
	p.enqueueAllLocked()
}

// notifier sends the statuses of the provider's pods through the
// NotifyPods callback, from Options.NotifyWorkers goroutines: one of the
// provider's agent's loops, which stops after the engine, so the final
// statuses of the last hooks are still queued.
type notifier struct{ p *Provider }

// Run makes the queue of statuses to send, sends them until ctx ends, and
// returns once every send in flight returned.
func (n notifier) Run(ctx context.Context) error {
	p := n.p
	p.mu.Lock()
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](p.opts.NotifyRetry, p.opts.NotifyRetryMax)
	p.queue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[types.UID]{Clock: p.opts.Clock})
	p.enqueueAllLocked()
	p.mu.Unlock()
	var wg sync.WaitGroup
	for range p.opts.NotifyWorkers {
		wg.Go(func() {
			for p.notifyNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
	return nil
}

func (p *Provider) enqueueLocked(uid types.UID) {
	if p.queue != nil && p.notify != nil {
		p.queue.Add(uid)
	}
}

func (p *Provider) enqueueAllLocked() {
	for uid, e := range p.entries {
		if e.status != nil && !e.delivered {
			p.enqueueLocked(uid)
		}
	}
}

// notifyNext sends one queued status. It returns false when the queue has
// shut down.
func (p *Provider) notifyNext(ctx context.Context) bool {
	uid, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(uid)
	if ctx.Err() != nil {
		return true
	}
	p.mu.Lock()
	e := p.entries[uid]
	notify := p.notify
	if e == nil || e.gone || e.status == nil || e.delivered || notify == nil {
		p.mu.Unlock()
		p.queue.Forget(uid)
		return true
	}
	pod, final, version := e.snapshot(), e.final, e.version
	p.mu.Unlock()

	if p.api != nil {
		cur, err := p.api.Pods(pod.Namespace).Get(pod.Name)
		switch {
		case err == nil && cur.UID != uid:
			// The name belongs to a successor now: this pod's API object is
			// gone. Make sure the successor's own status is (re)sent, in
			// case a notification of ours raced with the name change.
			p.mu.Lock()
			if ce := p.entries[cur.UID]; ce != nil && ce.status != nil {
				p.enqueueLocked(cur.UID)
			}
			p.mu.Unlock()
			fallthrough
		case apierrors.IsNotFound(err):
			p.confirm(uid, version)
			p.queue.Forget(uid)
			return true
		case err != nil:
			p.queue.AddRateLimited(uid)
			return true
		}
	}

	notify(pod)
	if !final {
		p.queue.Forget(uid)
		return true
	}
	if p.inAPI(pod) {
		p.confirm(uid, version)
		p.queue.Forget(uid)
	} else {
		p.queue.AddRateLimited(uid)
	}
	return true
}

// inAPI reports whether the final status sent in pod has reached the API
// server: it shows the pod terminal, or no longer has it.
func (p *Provider) inAPI(pod *v1.Pod) bool {
	if p.api == nil {
		return true
	}
	cur, err := p.api.Pods(pod.Namespace).Get(pod.Name)
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	case cur.UID != pod.UID:
		return true
	}
	return podstatus.IsTerminal(cur.Status.Phase)
}

// confirm marks the status of the given version delivered.
func (p *Provider) confirm(uid types.UID, version uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[uid]; e != nil && e.version == version {
		e.delivered = true
	}
}
