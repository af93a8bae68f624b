package objectcache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/podenv"
)

// DefaultSyncTimeout is the default of Options.SyncTimeout.
const DefaultSyncTimeout = 5 * time.Second

// Options configure a Cache. The zero value is valid.
type Options struct {
	// RequestSync is called with the UID of each registered pod that
	// references an object when the object changes (it is created,
	// updated or deleted after its watch's first answer), from the
	// watch's goroutine; it must not block. Nil: nobody is told.
	RequestSync func(uid types.UID)
	// SyncTimeout bounds how long a Get waits for a new watch's first
	// answer. Defaults to DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Clock drives the watches' backoff and Get's wait. Defaults to the
	// real clock.
	Clock clock.WithTicker
	// Logger receives the watches' logs. Defaults to discarding.
	Logger logr.Logger
}

// Cache holds the secrets and config maps the registered pods reference,
// each kept current by a watch of its own. Create it with New.
type Cache struct {
	client kubernetes.Interface
	opts   Options

	mu sync.Mutex
	// pods holds the references of each registered pod.
	pods map[types.UID]map[objectKey]bool
	// items holds a watched object for each object some registered pod
	// references; an item's refs are exactly the pods of pods referencing
	// it, and never empty.
	items map[objectKey]*item
	// runCtx is Run's context while Run runs (nil before it, and after).
	runCtx context.Context
	// stopped is set once Run has begun to stop.
	stopped bool
	// watches counts the watches running, for Run to wait on.
	watches sync.WaitGroup
}

// objectKey names a watched object.
type objectKey struct {
	kind            kind
	namespace, name string
}

func (k objectKey) String() string { return string(k.kind) + " " + k.namespace + "/" + k.name }

// kind is the kind of a watched object, spelled as the API's NotFound
// errors spell the resource (secret "x" not found).
type kind string

const (
	kindSecret    kind = "secret"
	kindConfigMap kind = "configmap"
)

// item is one watched object.
type item struct {
	key   objectKey
	refs  map[types.UID]bool
	store *objectStore
	// cancel stops the watch; nil while it does not run (before Run, or
	// once the object is immutable).
	cancel context.CancelFunc
}

var _ podenv.Objects = (*Cache)(nil)

// New returns a Cache reading through client (the node's own). It starts
// nothing: call Run.
func New(client kubernetes.Interface, opts Options) (*Cache, error) {
	if client == nil {
		return nil, errors.New("objectcache: New needs a client")
	}
	if opts.SyncTimeout < 0 {
		return nil, fmt.Errorf("objectcache: Options.SyncTimeout is %v; want 0 (the default, %v) or more", opts.SyncTimeout, DefaultSyncTimeout)
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Cache{
		client: client,
		opts:   opts,
		pods:   map[types.UID]map[objectKey]bool{},
		items:  map[objectKey]*item{},
	}, nil
}

// Run runs the watches until ctx ends: those of pods registered before
// it at once, later ones as RegisterPod asks. It returns nil once every
// watch has stopped. Call it once; a second call is an error.
func (c *Cache) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.runCtx != nil || c.stopped {
		c.mu.Unlock()
		return errors.New("objectcache: Run called twice")
	}
	c.runCtx = ctx
	for _, it := range c.items {
		c.startLocked(it)
	}
	c.mu.Unlock()

	<-ctx.Done()

	c.mu.Lock()
	c.stopped = true
	c.runCtx = nil
	for _, it := range c.items {
		if it.cancel != nil {
			it.cancel()
			it.cancel = nil
		}
	}
	c.mu.Unlock()
	c.watches.Wait()
	return nil
}

// RegisterPod makes the Cache watch every secret and config map pod
// references (its env, envFrom, secret, configMap and projected volumes,
// image pull secrets), and stop watching those an earlier registration of
// the same UID referenced and this one does not. Called from the
// runtime's SyncPod (any goroutine); it never blocks on the API server. A
// nil pod or a pod without a UID is ignored.
func (c *Cache) RegisterPod(pod *v1.Pod) {
	if pod == nil || pod.UID == "" {
		return
	}
	refs := references(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.pods[pod.UID]
	for k := range refs {
		it, ok := c.items[k]
		if !ok {
			it = &item{key: k, refs: map[types.UID]bool{}, store: newObjectStore(k.name, func() { c.changed(k) })}
			c.items[k] = it
			if c.runCtx != nil {
				c.startLocked(it)
			}
		}
		it.refs[pod.UID] = true
	}
	c.pods[pod.UID] = refs
	for k := range old {
		if !refs[k] {
			c.dropLocked(k, pod.UID)
		}
	}
}

// UnregisterPod drops the references of the pod uid; the watches of
// objects no other registered pod references stop. Called from the
// runtime's SyncTerminatedPod (any goroutine).
func (c *Cache) UnregisterPod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.pods[uid] {
		c.dropLocked(k, uid)
	}
	delete(c.pods, uid)
}

// Watching returns the objects watched now ("secret ns/name"), for
// diagnostics and tests, sorted. An immutable object is no longer watched.
func (c *Cache) Watching() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, it := range c.items {
		if it.cancel != nil && !it.store.isImmutable() {
			out = append(out, k.String())
		}
	}
	sort.Strings(out)
	return out
}

// dropLocked removes uid's reference to k, and the item with its last.
// c.mu must be held.
func (c *Cache) dropLocked(k objectKey, uid types.UID) {
	it, ok := c.items[k]
	if !ok {
		return
	}
	delete(it.refs, uid)
	if len(it.refs) > 0 {
		return
	}
	if it.cancel != nil {
		it.cancel()
		it.cancel = nil
	}
	delete(c.items, k)
}

// startLocked starts the watch of it. c.mu must be held, Run running.
func (c *Cache) startLocked(it *item) {
	if it.store.isImmutable() {
		return
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	it.cancel = cancel
	logger := c.opts.Logger.WithValues("object", it.key.String())
	w := c.newObjectWatch(it.key, it.store, logger)
	store := it.store
	c.watches.Add(1)
	go func() {
		defer c.watches.Done()
		store.stopOnImmutable(cancel)
		w.run(ctx, c.opts.Clock)
	}()
}

// changed tells RequestSync of every pod referencing k.
func (c *Cache) changed(k objectKey) {
	if c.opts.RequestSync == nil {
		return
	}
	c.mu.Lock()
	var uids []types.UID
	if it, ok := c.items[k]; ok {
		for uid := range it.refs {
			uids = append(uids, uid)
		}
	}
	c.mu.Unlock()
	for _, uid := range uids {
		func() {
			defer func() {
				if r := recover(); r != nil {
					c.opts.Logger.Error(fmt.Errorf("%v", r), "RequestSync panicked", "podUID", uid)
				}
			}()
			c.opts.RequestSync(uid)
		}()
	}
}

// GetSecret returns the secret from its watch: podenv.Objects. The secret
// must be referenced by a registered pod. A secret that does not exist is
// the API's NotFound error (secret "name" not found); a watch that has
// not answered within Options.SyncTimeout (or ctx) is an error to retry.
// The secret is shared: do not modify it.
func (c *Cache) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := c.get(ctx, objectKey{kindSecret, namespace, name})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// GetConfigMap is GetSecret for config maps.
func (c *Cache) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := c.get(ctx, objectKey{kindConfigMap, namespace, name})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

func (c *Cache) get(ctx context.Context, k objectKey) (runtime.Object, error) {
	c.mu.Lock()
	it, ok := c.items[k]
	stopped := c.stopped
	c.mu.Unlock()
	switch {
	case stopped:
		return nil, fmt.Errorf("objectcache: %s: the cache is stopped", k)
	case !ok:
		return nil, fmt.Errorf("objectcache: %s is referenced by no registered pod", k)
	}
	t := c.opts.Clock.NewTimer(c.opts.SyncTimeout)
	defer t.Stop()
	select {
	case <-it.store.synced:
	case <-ctx.Done():
		return nil, fmt.Errorf("objectcache: failed to sync %s cache: %w", k.kind, ctx.Err())
	case <-t.C():
		return nil, fmt.Errorf("objectcache: failed to sync %s cache: no answer from the API server within %v", k.kind, c.opts.SyncTimeout)
	}
	obj := it.store.get()
	if obj == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: string(k.kind)}, k.name)
	}
	return obj, nil
}

// references returns the secrets and config maps pod references.
func references(pod *v1.Pod) map[objectKey]bool {
	refs := map[objectKey]bool{}
	add := func(k kind, name string) {
		if name != "" {
			refs[objectKey{k, pod.Namespace, name}] = true
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(kindSecret, s.Name)
	}
	containers := func(c *v1.Container) {
		for _, from := range c.EnvFrom {
			if from.SecretRef != nil {
				add(kindSecret, from.SecretRef.Name)
			}
			if from.ConfigMapRef != nil {
				add(kindConfigMap, from.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				add(kindSecret, e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				add(kindConfigMap, e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		containers(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		containers(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		containers(&c)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add(kindSecret, v.Secret.SecretName)
		case v.ConfigMap != nil:
			add(kindConfigMap, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add(kindSecret, s.Secret.Name)
				}
				if s.ConfigMap != nil {
					add(kindConfigMap, s.ConfigMap.Name)
				}
			}
		}
	}
	return refs
}
