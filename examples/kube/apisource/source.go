package apisource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

// Options configure an Source. The zero value is valid.
type Options struct {
	// Source is the name the snapshots are sent under. Defaults to
	// mirror.ApiserverSource ("api"); only that name makes the pods API
	// pods for the rest of podkit.
	Source string
	// Logger receives the informer's logs and the source's errors.
	// Defaults to the zero Logger, which discards.
	Logger logr.Logger
}

// Source is the config source of the pods the API server binds to one
// node: every pod whose spec.nodeName is the node, mirror pods included. It
// lists and watches them through a client-go informer with a
// spec.nodeName field selector — the only pod list a node identity may make
// under the Node authorizer — and sends each state of the set as a full
// snapshot to a podconfig.PodSink, normally a *podconfig.Config, which
// stamps every pod with the source's name and turns the snapshots into
// podconfig.PodUpdates (OpAdd, OpUpdate, OpDelete, OpReconcile, OpRemove).
//
// Snapshots start once the informer has listed everything, so the first one
// is complete (a partial first snapshot would make the agent kill the pods
// it has not seen yet). Changes that arrive while a snapshot is being
// delivered coalesce into the next one, which always reflects the newest
// state.
//
// Create it with New and run it with Run.
type Source struct {
	pods     corev1client.PodsGetter
	nodeName string
	opts     Options
}

// New returns an Source for the pods bound to nodeName, read
// through pods (usually clientset.CoreV1()). It starts nothing: call Run.
func New(pods corev1client.PodsGetter, nodeName string, opts Options) (*Source, error) {
	if pods == nil {
		return nil, errors.New("apisource: New needs a pods client")
	}
	if nodeName == "" {
		return nil, errors.New("apisource: New needs a node name")
	}
	if opts.Source == "" {
		opts.Source = mirror.ApiserverSource
	}
	return &Source{pods: pods, nodeName: nodeName, opts: opts}, nil
}

// Source returns the source name the snapshots are sent under.
func (s *Source) Source() string { return s.opts.Source }

// ListerWatcher returns the list+watch of the pods bound to nodeName, with
// the spec.nodeName field selector, over pods (usually
// clientset.CoreV1()).
func ListerWatcher(pods corev1client.PodsGetter, nodeName string) *cache.ListWatch {
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = selector
			return pods.Pods(metav1.NamespaceAll).List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = selector
			return pods.Pods(metav1.NamespaceAll).Watch(ctx, options)
		},
	}
}

// Run lists and watches the node's pods until ctx ends, sending a snapshot
// to sink after the first complete list and after every change, and
// returns nil then. List and watch failures are retried by the informer
// with backoff; Run returns an error only when sink refuses a snapshot for
// another reason than ctx ending, or for a nil sink. Call it from a
// goroutine of its own; the informer runs on goroutines that end before
// Run returns.
func (s *Source) Run(ctx context.Context, sink podconfig.PodSink) error {
	if sink == nil {
		return errors.New("apisource: Source.Run needs a PodSink, got nil")
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	logger := s.opts.Logger
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &logger,
		ListerWatcher: ListerWatcher(s.pods, s.nodeName),
		ObjectType:    &v1.Pod{},
		Transform:     dropManagedFields,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
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
		return nil // ctx ended before the first list
	}
	for {
		if err := sink.SetPods(ctx, s.opts.Source, snapshot(store)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("apisource: API source of node %q: %w", s.nodeName, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// dropManagedFields is the informer's transform: a pod without its
// managed fields (server-side apply's record of who set what, a few KiB
// per pod that nothing on a node reads), anything else as it came. The
// informer owns the decoded pod, so it is changed in place.
func dropManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}

// snapshot returns the pods in store, in a stable order. The pods are the
// informer's and must not be modified; PodSink does not.
func snapshot(store cache.Store) []*v1.Pod {
	objs := store.List()
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return pods
}
