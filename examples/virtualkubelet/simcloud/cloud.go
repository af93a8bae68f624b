package simcloud

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
)

// ErrUnavailable is the error of an injected failure: the call did not take
// effect.
var ErrUnavailable = errors.New("simcloud: service unavailable (injected failure)")

// Op names a call of the cloud's API.
type Op string

// The calls a Cloud records.
const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	OpStop   Op = "stop"
	OpRemove Op = "remove"
	OpStatus Op = "status"
	OpList   Op = "list"
	// OpExec, OpAttach, OpPortForward and OpLogs open a session (the
	// call's latency and failures apply to the opening only); OpUsage
	// reads every pod's resource usage.
	OpExec        Op = "exec"
	OpAttach      Op = "attach"
	OpPortForward Op = "portforward"
	OpLogs        Op = "logs"
	OpUsage       Op = "usage"
)

// Call is one recorded call of the cloud's API.
type Call struct {
	Op  Op
	UID types.UID // empty for List
	// Image is the first container's image, for Create and Update.
	Image string
	// Grace is the grace period given to Stop.
	Grace time.Duration
	// Err is what the call returned.
	Err error
	// At is when the call returned, on the cloud's clock.
	At time.Time
}

// Options configure a Cloud. The zero value is valid: an instant cloud
// that never fails.
type Options struct {
	// Clock is the source of time for latency and timestamps. Defaults to
	// the real clock.
	Clock clock.WithTicker
	// Latency is the mean duration of a call; each call's is drawn
	// uniformly from [Latency/2, 3*Latency/2). Defaults to 0: instant.
	Latency time.Duration
	// FailureRate is the probability, in [0, 1], that a call fails with
	// ErrUnavailable, after its latency and before it takes effect.
	// Defaults to 0.
	FailureRate float64
	// Seed seeds the random draws (latency, failures). The draws are a
	// fixed sequence for a seed; which call gets which draw depends on the
	// order concurrent callers arrive in. Defaults to 0.
	Seed uint64
	// MaxCalls is how many calls the cloud keeps for Calls: the newest
	// ones; older ones are dropped. Defaults to DefaultMaxCalls. (A
	// provider resyncs every running pod's status: 5,000 pods read every
	// 5 seconds are 1,000 calls a second, which an unbounded record would
	// hold forever.)
	MaxCalls int
}

// DefaultMaxCalls is the default of Options.MaxCalls.
const DefaultMaxCalls = 100_000

// Cloud is the simulated cloud. Create it with New; its methods are safe
// for concurrent use.
type Cloud struct {
	clock   clock.WithTicker
	latency time.Duration

	mu          sync.Mutex
	rand        *rand.Rand
	failureRate float64
	pods        map[types.UID]*cloudPod
	paused      map[types.UID]*pause
	// held are the calls a pause holds now (Held).
	held map[*Call]struct{}
	// inject counts failures still to inject, by operation and pod.
	inject map[injectKey]int
	// calls holds the newest calls, up to 2*maxCalls, of which Calls
	// returns the last maxCalls (trimmed in bulk, so a call costs O(1)).
	calls    []Call
	maxCalls int
	nextIP   int
}

type injectKey struct {
	op  Op
	uid types.UID
}

type cloudPod struct {
	remote  vk.RemotePod
	restart v1.RestartPolicy
	// spec holds the containers as created (ports, stdin, env,
	// resources); nil for an injected pod.
	spec []v1.Container
	// out holds each container's output, by name.
	out map[string]*output
	// usage holds figures set with SetUsage, by container name.
	usage map[string]Usage
}

// started records in the container's output that it (re)started.
func (cp *cloudPod) started(at time.Time, rc *vk.RemoteContainer) {
	cp.output(rc.Name).write(at, []byte(fmt.Sprintf("simcloud: container %s started (image %s)\n", rc.Name, rc.Image)))
}

// wake wakes everything waiting on the pod's outputs: the pod is gone.
func (cp *cloudPod) wake() {
	for _, o := range cp.out {
		o.wake()
	}
}

// output returns the named container's output, made on first use.
func (cp *cloudPod) output(name string) *output {
	o := cp.out[name]
	if o == nil {
		o = newOutput()
		cp.out[name] = o
	}
	return o
}

// container returns the spec of the named container, or nil.
func (cp *cloudPod) container(name string) *v1.Container {
	for i := range cp.spec {
		if cp.spec[i].Name == name {
			return &cp.spec[i]
		}
	}
	return nil
}

// remoteContainer returns the state of the named container, or nil.
func (cp *cloudPod) remoteContainer(name string) *vk.RemoteContainer {
	for i := range cp.remote.Containers {
		if cp.remote.Containers[i].Name == name {
			return &cp.remote.Containers[i]
		}
	}
	return nil
}

var (
	_ vk.Backend        = (*Cloud)(nil)
	_ vk.BackendLister  = (*Cloud)(nil)
	_ vk.BackendUpdater = (*Cloud)(nil)
)

// New returns an empty cloud. It starts no goroutines.
func New(opts Options) (*Cloud, error) {
	if opts.Latency < 0 {
		return nil, fmt.Errorf("simcloud: Latency is %v; want 0 or more", opts.Latency)
	}
	if opts.FailureRate < 0 || opts.FailureRate > 1 {
		return nil, fmt.Errorf("simcloud: FailureRate is %v; want a value in [0, 1]", opts.FailureRate)
	}
	if opts.MaxCalls < 0 {
		return nil, fmt.Errorf("simcloud: MaxCalls is %d; want 0 (the default) or more", opts.MaxCalls)
	}
	if opts.MaxCalls == 0 {
		opts.MaxCalls = DefaultMaxCalls
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Cloud{
		maxCalls:    opts.MaxCalls,
		clock:       opts.Clock,
		latency:     opts.Latency,
		rand:        rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		failureRate: opts.FailureRate,
		pods:        map[types.UID]*cloudPod{},
		paused:      map[types.UID]*pause{},
		held:        map[*Call]struct{}{},
		inject:      map[injectKey]int{},
	}, nil
}

// SetFailureRate changes the probability that a call fails (clamped to
// [0, 1]); calls already past their draw are not affected.
func (c *Cloud) SetFailureRate(rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failureRate = min(max(rate, 0), 1)
}

// InjectError makes the next n calls of op for uid fail with
// ErrUnavailable, whatever the failure rate (uid is empty for List).
func (c *Cloud) InjectError(op Op, uid types.UID, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n <= 0 {
		delete(c.inject, injectKey{op, uid})
		return
	}
	c.inject[injectKey{op, uid}] = n
}

// Pause holds the later calls of the given operations (all operations
// when none is given) for uid, and those already waiting out their
// latency, until the returned resume is called or the caller's ctx ends:
// the remote API hangs for that pod. resume is idempotent. Pauses of one
// pod do not nest: the newest replaces the previous one's operations.
func (c *Cloud) Pause(uid types.UID, ops ...Op) (resume func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &pause{ch: make(chan struct{}), ops: slices.Clone(ops)}
	if old := c.paused[uid]; old != nil {
		close(old.ch)
	}
	c.paused[uid] = p
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.paused[uid] == p {
				delete(c.paused, uid)
				close(p.ch)
			}
		})
	}
}

type pause struct {
	ch  chan struct{}
	ops []Op
}

func (p *pause) holds(op Op) bool { return len(p.ops) == 0 || slices.Contains(p.ops, op) }

// call runs one API call: its latency, a pause, a failure draw, then op
// under the lock. It records the call.
func (c *Cloud) call(ctx context.Context, rec Call, op func() error) error {
	c.mu.Lock()
	d := time.Duration(0)
	if c.latency > 0 {
		d = c.latency/2 + time.Duration(c.rand.Int64N(int64(c.latency)))
	}
	fail := c.failureRate > 0 && c.rand.Float64() < c.failureRate
	if k := (injectKey{rec.Op, rec.UID}); c.inject[k] > 0 {
		fail = true
		if c.inject[k]--; c.inject[k] == 0 {
			delete(c.inject, k)
		}
	}
	c.mu.Unlock()

	err := c.wait(ctx, &rec, d)
	if err == nil && fail {
		err = ErrUnavailable
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		err = op()
	}
	rec.Err, rec.At = err, c.clock.Now()
	if len(c.calls) >= 2*c.maxCalls {
		c.calls = append(c.calls[:0], c.calls[len(c.calls)-c.maxCalls+1:]...)
	}
	c.calls = append(c.calls, rec)
	return err
}

// wait waits out a call's latency d, then any pause that holds it, while
// ctx lasts. While paused, rec is among the held calls.
func (c *Cloud) wait(ctx context.Context, rec *Call, d time.Duration) error {
	if d > 0 {
		t := c.clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		c.mu.Lock()
		delete(c.held, rec)
		c.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		p := c.paused[rec.UID]
		if p == nil || !p.holds(rec.Op) {
			c.mu.Unlock()
			return ctx.Err()
		}
		c.held[rec] = struct{}{}
		c.mu.Unlock()
		select {
		case <-p.ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func firstImage(pod *v1.Pod) string {
	if len(pod.Spec.Containers) == 0 {
		return ""
	}
	return pod.Spec.Containers[0].Image
}

func (c *Cloud) notFound(uid types.UID) error {
	return fmt.Errorf("simcloud: pod %s: %w", uid, vk.ErrNotFound)
}

// Create starts the pod's containers (init containers are not simulated).
func (c *Cloud) Create(ctx context.Context, pod *v1.Pod) error {
	return c.call(ctx, Call{Op: OpCreate, UID: pod.UID, Image: firstImage(pod)}, func() error {
		if _, ok := c.pods[pod.UID]; ok {
			return fmt.Errorf("simcloud: pod %s: %w", pod.UID, vk.ErrAlreadyExists)
		}
		now := c.clock.Now()
		c.nextIP++
		cp := &cloudPod{
			remote: vk.RemotePod{
				UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name,
				IP:        fmt.Sprintf("10.%d.%d.%d", c.nextIP>>16&255, c.nextIP>>8&255, c.nextIP&255),
				CreatedAt: now,
			},
			restart: pod.Spec.RestartPolicy,
			out:     map[string]*output{},
		}
		for _, ct := range pod.Spec.Containers {
			cp.spec = append(cp.spec, *ct.DeepCopy())
			cp.remote.Containers = append(cp.remote.Containers, vk.RemoteContainer{
				Name: ct.Name, Image: ct.Image, State: vk.ContainerRunning, StartedAt: now,
			})
			cp.started(now, &cp.remote.Containers[len(cp.remote.Containers)-1])
		}
		c.pods[pod.UID] = cp
		return nil
	})
}

// Update replaces the images of the pod's containers; a container whose
// image changes is restarted with it.
func (c *Cloud) Update(ctx context.Context, pod *v1.Pod) error {
	return c.call(ctx, Call{Op: OpUpdate, UID: pod.UID, Image: firstImage(pod)}, func() error {
		cp, ok := c.pods[pod.UID]
		if !ok {
			return c.notFound(pod.UID)
		}
		if !cp.remote.Running() {
			return fmt.Errorf("simcloud: pod %s has stopped and cannot be updated", pod.UID)
		}
		now := c.clock.Now()
		for _, ct := range pod.Spec.Containers {
			for i := range cp.remote.Containers {
				rc := &cp.remote.Containers[i]
				if rc.Name == ct.Name && rc.Image != ct.Image {
					rc.Image, rc.State, rc.StartedAt = ct.Image, vk.ContainerRunning, now
					rc.RestartCount++
					cp.started(now, rc)
				}
			}
		}
		return nil
	})
}

// Stop stops every running container; they exit with code 0 (the
// simulated workloads honour SIGTERM within any grace period).
func (c *Cloud) Stop(ctx context.Context, uid types.UID, grace time.Duration) error {
	return c.call(ctx, Call{Op: OpStop, UID: uid, Grace: grace}, func() error {
		cp, ok := c.pods[uid]
		if !ok {
			return c.notFound(uid)
		}
		now := c.clock.Now()
		for i := range cp.remote.Containers {
			if rc := &cp.remote.Containers[i]; rc.State != vk.ContainerExited {
				rc.State, rc.ExitCode, rc.FinishedAt = vk.ContainerExited, 0, now
				cp.output(rc.Name).write(now, []byte(fmt.Sprintf("simcloud: container %s stopped (grace %v)\n", rc.Name, grace)))
			}
		}
		return nil
	})
}

// Remove deletes a stopped pod. Removing a pod with running containers is
// an error: the cloud insists on being told to stop them first.
func (c *Cloud) Remove(ctx context.Context, uid types.UID) error {
	return c.call(ctx, Call{Op: OpRemove, UID: uid}, func() error {
		cp, ok := c.pods[uid]
		if !ok {
			return c.notFound(uid)
		}
		if cp.remote.Running() {
			return fmt.Errorf("simcloud: pod %s still has running containers; stop it first", uid)
		}
		delete(c.pods, uid)
		cp.wake()
		return nil
	})
}

// Status returns the pod.
func (c *Cloud) Status(ctx context.Context, uid types.UID) (*vk.RemotePod, error) {
	var out *vk.RemotePod
	err := c.call(ctx, Call{Op: OpStatus, UID: uid}, func() error {
		cp, ok := c.pods[uid]
		if !ok {
			return c.notFound(uid)
		}
		out = cp.remote.DeepCopy()
		return nil
	})
	return out, err
}

// List returns every pod, ordered by creation.
func (c *Cloud) List(ctx context.Context) ([]vk.RemotePod, error) {
	var out []vk.RemotePod
	err := c.call(ctx, Call{Op: OpList}, func() error {
		out = c.podsLocked()
		return nil
	})
	return out, err
}

func (c *Cloud) podsLocked() []vk.RemotePod {
	out := make([]vk.RemotePod, 0, len(c.pods))
	for _, cp := range c.pods {
		out = append(out, *cp.remote.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].UID < out[j].UID
	})
	return out
}

// Exit ends the workload of every running container of the pod with
// exitCode, as if the program returned. The cloud applies the pod's
// restart policy: Always restarts the container, OnFailure restarts it on
// a non-zero code, Never leaves it exited. It is not an API call: no
// latency, no failure, not recorded.
func (c *Cloud) Exit(uid types.UID, exitCode int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.pods[uid]
	if !ok {
		return c.notFound(uid)
	}
	now := c.clock.Now()
	restart := cp.restart == v1.RestartPolicyAlways || cp.restart == "" ||
		(cp.restart == v1.RestartPolicyOnFailure && exitCode != 0)
	for i := range cp.remote.Containers {
		rc := &cp.remote.Containers[i]
		if rc.State != vk.ContainerRunning {
			continue
		}
		cp.output(rc.Name).write(now, []byte(fmt.Sprintf("simcloud: container %s exited with code %d\n", rc.Name, exitCode)))
		if restart {
			rc.RestartCount++
			rc.StartedAt = now
			cp.started(now, rc)
			continue
		}
		rc.State, rc.ExitCode, rc.FinishedAt = vk.ContainerExited, exitCode, now
	}
	return nil
}

// Lose makes the cloud lose the pod, running or not, as a failed host
// would: it is gone without having been stopped. Not an API call.
func (c *Cloud) Lose(uid types.UID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.pods[uid]
	if !ok {
		return c.notFound(uid)
	}
	delete(c.pods, uid)
	cp.wake()
	return nil
}

// Inject puts a pod into the cloud directly, as one left over from an
// earlier run of the provider. Its restart policy is Always.
func (c *Cloud) Inject(pod vk.RemotePod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods[pod.UID] = &cloudPod{remote: *pod.DeepCopy(), restart: v1.RestartPolicyAlways, out: map[string]*output{}}
}

// Pods returns every pod the cloud has, ordered by creation, without
// going through the API (no latency, no failure, not recorded).
func (c *Cloud) Pods() []vk.RemotePod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.podsLocked()
}

// Held returns the calls a Pause holds now, optionally only those of the
// given operations, in no particular order; their Err and At are not set
// yet. A test waits for a call to be held before it acts on the call in
// flight (a hung Stop, say).
func (c *Cloud) Held(ops ...Op) []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Call
	for rec := range c.held {
		if len(ops) == 0 || slices.Contains(ops, rec.Op) {
			out = append(out, *rec)
		}
	}
	return out
}

// Calls returns the calls recorded so far (the newest Options.MaxCalls),
// in the order they returned, optionally only those of the given
// operations.
func (c *Cloud) Calls(ops ...Op) []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.calls[max(0, len(c.calls)-c.maxCalls):]
	if len(ops) == 0 {
		return slices.Clone(kept)
	}
	var out []Call
	for _, call := range kept {
		if slices.Contains(ops, call.Op) {
			out = append(out, call)
		}
	}
	return out
}
