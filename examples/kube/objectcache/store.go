package objectcache

import (
	"context"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// objectStore is the store of one object's watch (a cache.ReflectorStore
// of at most one object): the object, or nothing when it does not exist,
// and whether the watch has answered yet. It calls onChange when the
// object changes after the first answer.
type objectStore struct {
	// name is the object's: anything else a watch delivers is ignored.
	name     string
	onChange func()

	mu sync.Mutex
	// obj is the object, nil when it does not exist (or before synced).
	obj runtime.Object
	// version is obj's resourceVersion ("" when there is none).
	version string
	// synced is closed once the watch's first list (or watch-list) has
	// been stored.
	synced     chan struct{}
	syncedOnce bool
	// immutable is set once the object is immutable; stop then stops the
	// watch (nil until the watch started).
	immutable bool
	stop      context.CancelFunc
}

var _ cache.ReflectorStore = (*objectStore)(nil)

func newObjectStore(name string, onChange func()) *objectStore {
	return &objectStore{name: name, onChange: onChange, synced: make(chan struct{})}
}

// Add stores obj (an object the watch saw created).
func (s *objectStore) Add(obj any) error {
	if s.ours(obj) {
		s.set(obj)
	}
	return nil
}

// Update stores obj (an object the watch saw updated).
func (s *objectStore) Update(obj any) error { return s.Add(obj) }

// Delete forgets the object.
func (s *objectStore) Delete(obj any) error {
	if s.ours(obj) {
		s.set(nil)
	}
	return nil
}

// Replace stores the object of the list (none: it does not exist), and
// marks the store synced.
func (s *objectStore) Replace(list []any, _ string) error {
	var obj any
	for _, o := range list {
		if s.ours(o) {
			obj = o
		}
	}
	s.set(obj)
	s.mu.Lock()
	first := !s.syncedOnce
	s.syncedOnce = true
	s.mu.Unlock()
	if first {
		close(s.synced)
	}
	return nil
}

// Resync does nothing: there is nothing to resync to.
func (s *objectStore) Resync() error { return nil }

// ours reports whether obj is the store's object (by name: the watch's
// field selector sends no other, but a fake client might), or a deletion
// marker of it.
func (s *objectStore) ours(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	return err == nil && m.GetName() == s.name
}

// set stores obj (nil: none), and calls onChange when the store was
// synced and the object changed.
func (s *objectStore) set(v any) {
	obj := slim(v)
	version := ""
	if obj != nil {
		if m, err := meta.Accessor(obj); err == nil {
			version = m.GetResourceVersion()
		}
	}
	s.mu.Lock()
	// A real API server gives every change a new resourceVersion; an
	// object without one (a fake client's) is compared whole.
	changed := (s.obj == nil) != (obj == nil) || s.version != version ||
		(version == "" && !equality.Semantic.DeepEqual(s.obj, obj))
	notify := changed && s.syncedOnce
	s.obj, s.version = obj, version
	stop := s.checkImmutableLocked()
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if notify && s.onChange != nil {
		s.onChange()
	}
}

// lastApplied is the annotation kubectl apply keeps the applied object in:
// for a secret, its data a second time.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// slim returns v (a Secret or ConfigMap from the watch) without what no
// pod feature reads and that can be as big as the object: its managed
// fields and kubectl's last-applied annotation. v itself is not changed.
// Anything else comes back as it is (nil for what is no object).
func slim(v any) runtime.Object {
	switch o := v.(type) {
	case *v1.Secret:
		c := *o
		c.ObjectMeta = slimMeta(o.ObjectMeta)
		return &c
	case *v1.ConfigMap:
		c := *o
		c.ObjectMeta = slimMeta(o.ObjectMeta)
		return &c
	}
	obj, _ := v.(runtime.Object)
	return obj
}

func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		m.Annotations = maps.Clone(m.Annotations)
		delete(m.Annotations, lastApplied)
	}
	return m
}

// checkImmutableLocked marks the store immutable when its object is, and
// returns the watch's stop then. s.mu must be held.
func (s *objectStore) checkImmutableLocked() context.CancelFunc {
	var immutable *bool
	switch o := s.obj.(type) {
	case *v1.Secret:
		immutable = o.Immutable
	case *v1.ConfigMap:
		immutable = o.Immutable
	}
	if immutable == nil || !*immutable || s.immutable {
		return nil
	}
	s.immutable = true
	return s.stop
}

// stopOnImmutable gives the store the watch's stop, called once the
// object is immutable (at once if it already is).
func (s *objectStore) stopOnImmutable(stop context.CancelFunc) {
	s.mu.Lock()
	s.stop = stop
	already := s.immutable
	s.mu.Unlock()
	if already {
		stop()
	}
}

// isImmutable reports whether the object was seen immutable.
func (s *objectStore) isImmutable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.immutable
}

// get returns the object, nil when it does not exist.
func (s *objectStore) get() runtime.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.obj
}
