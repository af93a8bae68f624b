package mirrortest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// Verb names a PodAPI call.
type Verb string

// The verbs of mirror.PodAPI.
const (
	VerbCreate Verb = "create"
	VerbGet    Verb = "get"
	VerbDelete Verb = "delete"
)

// Call is one recorded PodAPI call.
type Call struct {
	// Verb is the method called.
	Verb Verb
	// Namespace is the namespace argument.
	Namespace string
	// Name is the name argument, or the given pod's name for Create.
	Name string
	// Pod is a copy of the pod given to Create; nil for other verbs.
	Pod *v1.Pod
	// DeleteOptions is a copy of the options given to Delete; nil for
	// other verbs.
	DeleteOptions *metav1.DeleteOptions
}

// FakePodAPI is an in-memory mirror.PodAPI that answers like an API server:
//
//   - Create stores a copy of the pod with a new UID ("uid-1", "uid-2", …)
//     and resourceVersion, and fails with AlreadyExists if the name is
//     taken, with BadRequest for a nil pod, a missing name, a namespace
//     that differs from the pod's, or a resourceVersion already set;
//   - Get returns a copy, or NotFound;
//   - Delete removes the pod, or fails with NotFound, or with Conflict when
//     a UID or resourceVersion precondition does not match.
//
// Graceful deletion is not modelled: every successful Delete removes the pod
// at once; the options given are in Calls. As with client-go, a failing
// Create or Get returns an empty, non-nil pod with its error, so code that
// wrongly inspects it is caught.
//
// The zero value is not ready; use NewFakePodAPI. Safe for concurrent use.
type FakePodAPI struct {
	mu sync.Mutex
	// pods holds the stored objects by namespace/name; they never leave
	// the fake except as copies.
	pods map[types.NamespacedName]*v1.Pod
	// seq numbers UIDs and resourceVersions; it only grows.
	seq      int
	calls    []Call
	injected map[Verb]error
	reactor  func(Call) error
}

var _ mirror.PodAPI = (*FakePodAPI)(nil)

// NewFakePodAPI returns a FakePodAPI holding copies of pods, stored as given
// (keeping their UIDs; pods without one get a generated UID). Nil pods are
// skipped.
func NewFakePodAPI(pods ...*v1.Pod) *FakePodAPI {
	a := &FakePodAPI{
		pods:     make(map[types.NamespacedName]*v1.Pod),
		injected: make(map[Verb]error),
	}
	for _, p := range pods {
		a.Put(p)
	}
	return a
}

// Put stores a copy of pod as is, replacing any pod of the same namespace and
// name, without recording a call. It is how a test sets up objects the API
// server already holds, or changes one behind a client's back. A pod without
// a UID gets a generated one; its resourceVersion is always renewed. A nil
// pod is ignored.
func (a *FakePodAPI) Put(pod *v1.Pod) {
	if pod == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	stored := pod.DeepCopy()
	a.seq++
	if stored.UID == "" {
		stored.UID = types.UID("uid-" + strconv.Itoa(a.seq))
	}
	stored.ResourceVersion = strconv.Itoa(a.seq)
	a.pods[key(stored.Namespace, stored.Name)] = stored
}

// Remove deletes the stored pod namespace/name, if any, without recording a
// call, and reports whether there was one: for changing the fake behind a
// client's back.
func (a *FakePodAPI) Remove(namespace, name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(namespace, name)
	_, ok := a.pods[k]
	delete(a.pods, k)
	return ok
}

// Pod returns a copy of the stored pod namespace/name.
func (a *FakePodAPI) Pod(namespace, name string) (*v1.Pod, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods[key(namespace, name)]
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

// Pods returns copies of all stored pods, sorted by namespace then name. The
// slice is the caller's.
func (a *FakePodAPI) Pods() []*v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*v1.Pod, 0, len(a.pods))
	for _, p := range a.pods {
		out = append(out, p.DeepCopy())
	}
	slices.SortFunc(out, func(x, y *v1.Pod) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// Calls returns the calls made so far, oldest first, including failed ones.
// The slice and the copies in it are the caller's.
func (a *FakePodAPI) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Call, len(a.calls))
	for i, c := range a.calls {
		out[i] = copyCall(c)
	}
	return out
}

// InjectError makes every later call of verb fail with err, without changing
// anything, until InjectError(verb, nil). The call is still recorded.
func (a *FakePodAPI) InjectError(verb Verb, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		delete(a.injected, verb)
		return
	}
	a.injected[verb] = err
}

// SetReactor installs fn, called at the start of every later call (after it
// is recorded and before any injected error), with no lock held, so fn may
// call Put or other methods to change the fake between two calls of a
// client. A non-nil result fails the call with that error. nil removes the
// reactor.
func (a *FakePodAPI) SetReactor(fn func(Call) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reactor = fn
}

// begin records call and returns the error the call must fail with, if a
// reactor or an injected error says so.
func (a *FakePodAPI) begin(call Call) error {
	a.mu.Lock()
	a.calls = append(a.calls, copyCall(call))
	reactor := a.reactor
	a.mu.Unlock()
	if reactor != nil {
		if err := reactor(copyCall(call)); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.injected[call.Verb]
}

// Create implements mirror.PodAPI.
func (a *FakePodAPI) Create(_ context.Context, namespace string, pod *v1.Pod, _ metav1.CreateOptions) (*v1.Pod, error) {
	call := Call{Verb: VerbCreate, Namespace: namespace, Pod: pod}
	if pod != nil {
		call.Name = pod.Name
	}
	if err := a.begin(call); err != nil {
		return &v1.Pod{}, err
	}
	switch {
	case pod == nil:
		return &v1.Pod{}, apierrors.NewBadRequest("no pod given")
	case pod.Name == "":
		return &v1.Pod{}, apierrors.NewBadRequest("name or generateName is required")
	case pod.Namespace != "" && pod.Namespace != namespace:
		return &v1.Pod{}, apierrors.NewBadRequest(fmt.Sprintf(
			"the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", pod.Namespace, namespace))
	case pod.ResourceVersion != "":
		return &v1.Pod{}, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(namespace, pod.Name)
	if _, taken := a.pods[k]; taken {
		return &v1.Pod{}, apierrors.NewAlreadyExists(v1.Resource("pods"), pod.Name)
	}
	stored := pod.DeepCopy()
	stored.Namespace = namespace
	a.seq++
	stored.UID = types.UID("uid-" + strconv.Itoa(a.seq))
	stored.ResourceVersion = strconv.Itoa(a.seq)
	a.pods[k] = stored
	return stored.DeepCopy(), nil
}

// Get implements mirror.PodAPI.
func (a *FakePodAPI) Get(_ context.Context, namespace, name string, _ metav1.GetOptions) (*v1.Pod, error) {
	if err := a.begin(Call{Verb: VerbGet, Namespace: namespace, Name: name}); err != nil {
		return &v1.Pod{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods[key(namespace, name)]
	if !ok {
		return &v1.Pod{}, apierrors.NewNotFound(v1.Resource("pods"), name)
	}
	return p.DeepCopy(), nil
}

// Delete implements mirror.PodAPI.
func (a *FakePodAPI) Delete(_ context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if err := a.begin(Call{Verb: VerbDelete, Namespace: namespace, Name: name, DeleteOptions: &opts}); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(namespace, name)
	p, ok := a.pods[k]
	if !ok {
		return apierrors.NewNotFound(v1.Resource("pods"), name)
	}
	if pre := opts.Preconditions; pre != nil {
		if pre.UID != nil && *pre.UID != p.UID {
			return apierrors.NewConflict(v1.Resource("pods"), name, fmt.Errorf(
				"precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, p.UID))
		}
		if pre.ResourceVersion != nil && *pre.ResourceVersion != p.ResourceVersion {
			return apierrors.NewConflict(v1.Resource("pods"), name, fmt.Errorf(
				"precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s",
				*pre.ResourceVersion, p.ResourceVersion))
		}
	}
	delete(a.pods, k)
	return nil
}

func key(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

func copyCall(c Call) Call {
	if c.Pod != nil {
		c.Pod = c.Pod.DeepCopy()
	}
	if c.DeleteOptions != nil {
		c.DeleteOptions = c.DeleteOptions.DeepCopy()
	}
	return c
}
