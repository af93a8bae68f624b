package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Defaults of Registration.
const (
	// DefaultRetryInterval is the first wait before a failed
	// re-registration is tried again; it doubles up to
	// DefaultMaxRetryInterval.
	DefaultRetryInterval    = 500 * time.Millisecond
	DefaultMaxRetryInterval = 10 * time.Second
)

// Registration registers the node's Node and keeps it registered: when the
// Node is deleted while the agent runs (kubectl delete node, a cloud
// controller, a cleanup script), Run notices it at once from its watch of
// the Node, logs it, and creates the Node again, as virtual-kubelet's node
// controller does. The pod garbage collector deletes the pods of a Node
// that has been missing for about 40 seconds; a Node back within seconds
// keeps them.
//
// The Node created again is Node (its labels, annotations, taints and
// status) with, from the last state Run saw of the deleted one, the
// addresses and daemon endpoints (the kubelet API's, which
// PublishKubeletEndpoint set), the capacity, allocatable and node info:
// what the agent published about itself since it registered. Conditions
// are left to the heartbeat, spec.podCIDR to the control plane's node
// IPAM, which gives the new Node a range again.
//
// After each registration that created the Node again, OnRegistered is
// called: the agent writes its pods' statuses again and takes the new
// Node's UID (mirror pods and the Lease are owned by it).
//
// The zero value is not usable: set Client and Node. Register and Run are
// called from the agent's goroutines; NodeMissing may be called from any.
type Registration struct {
	// Client is the clientset to register through (required). A node
	// identity (system:node:<name>) may create, read and watch its own
	// Node.
	Client kubernetes.Interface
	// Node is the Node to register (required, with a name). It is not
	// modified.
	Node *v1.Node
	// OnRegistered, when set, is called from Run's goroutine with the
	// stored Node each time Run created it again. It must not block for
	// long: the Node's next deletion is noticed after it returns.
	OnRegistered func(ctx context.Context, node *v1.Node)
	// Logger receives the deletions noticed (level 0) and the failed
	// attempts to register again. Defaults to discarding them.
	Logger logr.Logger
	// Clock times the retries. Defaults to the real clock.
	Clock clock.Clock
	// RetryInterval and MaxRetryInterval bound the exponential wait
	// between two failed attempts to create the Node again. Default to
	// DefaultRetryInterval and DefaultMaxRetryInterval.
	RetryInterval, MaxRetryInterval time.Duration

	once    sync.Once
	missing chan struct{}
	// synced is closed once Run's informer has listed the Node.
	synced chan struct{}

	mu sync.Mutex
	// last is the newest state of the Node seen (registered, listed or
	// watched); nil before Register.
	last *v1.Node
}

func (r *Registration) init() {
	r.once.Do(func() { r.missing, r.synced = make(chan struct{}, 1), make(chan struct{}) })
}

func (r *Registration) validate() error {
	if r.Client == nil || r.Node == nil || r.Node.Name == "" {
		return errors.New("nodestatus: Registration needs Client and a named Node")
	}
	return nil
}

// Register makes sure the Node exists, as the package's Register does
// (creating it, or reusing the one of that name), and returns the stored
// object. Call it once, before Run.
func (r *Registration) Register(ctx context.Context) (*v1.Node, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	r.init()
	node, err := Register(ctx, r.Client.CoreV1(), r.Node)
	if err != nil {
		return nil, err
	}
	r.see(node)
	return node, nil
}

// NodeMissing tells Run the Node was found missing (a heartbeat's read
// answered NotFound): Run checks, and creates it again if it is gone. It
// never blocks.
func (r *Registration) NodeMissing() {
	r.init()
	select {
	case r.missing <- struct{}{}:
	default:
	}
}

// see records node as the newest state of the Node.
func (r *Registration) see(node *v1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if node != nil && node.Name == r.Node.Name && node.DeletionTimestamp == nil {
		r.last = node
	}
}

// Run watches the Node until ctx ends and creates it again each time it is
// deleted; it returns nil then. A failed creation is retried with backoff
// (the error logged); Run returns an error only when misconfigured. It
// returns once its informer's goroutines have.
func (r *Registration) Run(ctx context.Context) error {
	if err := r.validate(); err != nil {
		return err
	}
	r.init()
	name := r.Node.Name
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	nodes := r.Client.CoreV1().Nodes()
	logger := r.Logger
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger: &logger,
		// Watch-list where the client supports it, list-then-watch
		// otherwise.
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
				options.FieldSelector = selector
				return nodes.List(ctx, options)
			},
			WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
				options.FieldSelector = selector
				return nodes.Watch(ctx, options)
			},
		}, r.Client),
		ObjectType: &v1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.seeObject(obj) },
			UpdateFunc: func(_, obj any) { r.seeObject(obj) },
			DeleteFunc: func(obj any) {
				r.seeObject(obj)
				r.Logger.Info("Node was deleted; registering it again", "node", name)
				r.NodeMissing()
			},
		},
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		controller.RunWithContext(ctx)
	}()
	defer func() { <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), controller.HasSynced) {
		return nil
	}
	if _, exists, _ := store.GetByKey(name); !exists {
		r.Logger.Info("Node is missing; registering it again", "node", name)
		r.NodeMissing()
	}
	close(r.synced)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.missing:
		}
		node, ok := r.registerAgain(ctx)
		if ok && r.OnRegistered != nil {
			r.OnRegistered(ctx, node)
		}
	}
}

// seeObject records an informer's object (a Node, or the tombstone of a
// deleted one).
func (r *Registration) seeObject(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		r.see(node.DeepCopy())
	}
}

// registerAgain creates the Node if it is gone, trying until it is there
// or ctx ends. It reports whether it created it (false: it existed, or ctx
// ended).
func (r *Registration) registerAgain(ctx context.Context) (*v1.Node, bool) {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	wait := r.RetryInterval
	if wait <= 0 {
		wait = DefaultRetryInterval
	}
	maxWait := r.MaxRetryInterval
	if maxWait < wait {
		maxWait = max(DefaultMaxRetryInterval, wait)
	}
	nodes := r.Client.CoreV1().Nodes()
	for attempt := 1; ; attempt++ {
		want := r.desired()
		created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			r.see(created)
			r.Logger.Info("Registered the Node again", "node", want.Name, "uid", created.UID, "attempt", attempt)
			return created, true
		}
		if apierrors.IsAlreadyExists(err) {
			existing, getErr := nodes.Get(ctx, want.Name, metav1.GetOptions{})
			if getErr == nil && existing.DeletionTimestamp == nil {
				// Someone registered it first, or it never went away.
				r.see(existing)
				return existing, false
			}
			if getErr == nil {
				err = fmt.Errorf("the Node is being deleted")
			} else {
				err = getErr
			}
		}
		if ctx.Err() != nil {
			return nil, false
		}
		r.Logger.Error(err, "Registering the Node again failed; will retry", "node", want.Name, "attempt", attempt, "retryIn", wait)
		select {
		case <-ctx.Done():
			return nil, false
		case <-clk.After(wait):
		}
		wait = min(2*wait, maxWait)
	}
}

// desired is the Node to create again: Node with what the agent published
// since, from the last state seen.
func (r *Registration) desired() *v1.Node {
	node := r.Node.DeepCopy()
	node.ResourceVersion, node.UID = "", ""
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if last == nil {
		return node
	}
	if len(last.Status.Addresses) > 0 {
		node.Status.Addresses = append([]v1.NodeAddress(nil), last.Status.Addresses...)
	}
	if last.Status.DaemonEndpoints.KubeletEndpoint.Port != 0 {
		node.Status.DaemonEndpoints = last.Status.DaemonEndpoints
	}
	if len(last.Status.Capacity) > 0 {
		node.Status.Capacity = last.Status.Capacity.DeepCopy()
	}
	if len(last.Status.Allocatable) > 0 {
		node.Status.Allocatable = last.Status.Allocatable.DeepCopy()
	}
	if last.Status.NodeInfo != (v1.NodeSystemInfo{}) {
		node.Status.NodeInfo = last.Status.NodeInfo
	}
	return node
}
