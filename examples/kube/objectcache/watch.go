package objectcache

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/clock"
)

// The watch of one object. client-go's Reflector would do, but it costs a
// goroutine more per watch (its resync loop, which a store of one object
// without resync never needs) and keeps more state than one object needs;
// a node with 30 pods of a secret and a config map each runs 60 of them.
// This loop keeps what the Reflector does for it:
//
//   - the first answer is a watch-list (a watch that starts with the
//     object, ending its initial events with a bookmark) where the client
//     supports it, and a list otherwise, or when the watch-list fails;
//   - a watch that ends is resumed from the last resourceVersion seen;
//     one the API server no longer has (410 Gone) starts over;
//   - failures back off exponentially with jitter, from watchBackoffInitial
//     to watchBackoffMax, reset after watchBackoffReset without one;
//   - each watch asks the API server to end it after a random time between
//     minWatchTimeout and twice that.
const (
	watchBackoffInitial = 800 * time.Millisecond
	watchBackoffMax     = 30 * time.Second
	watchBackoffReset   = 2 * time.Minute
	// minWatchTimeout: a watch of one object rarely changes, so it is not
	// re-established every few minutes (the kubelet does the same).
	minWatchTimeout = 30 * time.Minute
	// shortWatch: a watch that ends sooner, having delivered nothing, is
	// a failure (backed off), not a timeout.
	shortWatch = time.Second
)

// objectWatch is one object's list and watch requests, and where its
// answers go.
type objectWatch struct {
	list   func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch  func(context.Context, metav1.ListOptions) (watch.Interface, error)
	store  *objectStore
	logger logr.Logger
	// watchList: the client supports watch-list requests.
	watchList bool
}

// newObjectWatch returns the watch of k through c's client.
func (c *Cache) newObjectWatch(k objectKey, store *objectStore, logger logr.Logger) *objectWatch {
	selector := fields.OneTermEqualSelector("metadata.name", k.name).String()
	w := &objectWatch{store: store, logger: logger, watchList: !watchlist.DoesClientNotSupportWatchListSemantics(c.client)}
	if k.kind == kindSecret {
		w.list, w.watch = oneObject(c.client.CoreV1().Secrets(k.namespace), selector)
	} else {
		w.list, w.watch = oneObject(c.client.CoreV1().ConfigMaps(k.namespace), selector)
	}
	return w
}

// listWatcher is a typed client of one kind in one namespace (client-go's
// SecretInterface, ConfigMapInterface), L its list type.
type listWatcher[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// oneObject returns client's list and watch requests narrowed to the
// objects of selector (one name).
func oneObject[L runtime.Object](client listWatcher[L], selector string) (
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) {
	list = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		opts.FieldSelector = selector
		return client.List(ctx, opts)
	}
	watchFn = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = selector
		return client.Watch(ctx, opts)
	}
	return list, watchFn
}

// errRestart: the watch must start over with a new first answer (its
// resourceVersion is gone).
var errRestart = errors.New("objectcache: the watch starts over")

// run keeps the store current until ctx ends. Called on the watch's own
// goroutine.
func (w *objectWatch) run(ctx context.Context, clk clock.WithTicker) {
	backoff := time.Duration(0)
	var lastFailure time.Time
	version := "" // the last resourceVersion seen; "" before the first answer
	for ctx.Err() == nil {
		var err error
		version, err = w.once(ctx, version, clk)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRestart) {
			version = ""
			continue
		}
		if err == nil {
			continue // a watch that timed out: resume it at once
		}
		now := clk.Now()
		if backoff == 0 || now.Sub(lastFailure) > watchBackoffReset {
			backoff = watchBackoffInitial
		} else {
			backoff = min(2*backoff, watchBackoffMax)
		}
		lastFailure = now
		w.logger.V(4).Info("Watch failed; retrying", "err", err, "after", backoff)
		wait := backoff + time.Duration(rand.Int64N(int64(backoff))) // jitter 1.0
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// once makes one watch request (with a first answer when version is "")
// and follows it until it ends: it returns the last resourceVersion seen,
// and nil when the watch ended by itself after some time (to be resumed),
// errRestart when it must start over, another error for a failure. A
// watch-list that ends before its initial events did returns "": its
// objects never reached the store, so the next request starts over.
func (w *objectWatch) once(ctx context.Context, version string, clk clock.WithTicker) (last string, _ error) {
	timeout := int64((minWatchTimeout + time.Duration(rand.Int64N(int64(minWatchTimeout)))) / time.Second)
	opts := metav1.ListOptions{ResourceVersion: version, AllowWatchBookmarks: true, TimeoutSeconds: &timeout}
	initial := version == ""
	var pending []any // a watch-list's initial objects, until its bookmark
	var wi watch.Interface
	if initial && w.watchList {
		listOpts := opts
		send := true
		listOpts.SendInitialEvents = &send
		listOpts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		var err error
		if wi, err = w.watch(ctx, listOpts); err != nil {
			// As client-go's Reflector: fall back to a list.
			w.logger.V(4).Info("The watch-list request failed; listing", "err", err)
			wi = nil
		}
	}
	if initial && wi == nil {
		list, err := w.list(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		lm, err := meta.ListAccessor(list)
		if err != nil {
			return "", err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return "", err
		}
		objs := make([]any, len(items))
		for i := range items {
			objs[i] = items[i]
		}
		version = lm.GetResourceVersion()
		_ = w.store.Replace(objs, version)
		initial = false
		opts.ResourceVersion = version
	}
	if wi == nil {
		var err error
		if wi, err = w.watch(ctx, opts); err != nil {
			if isExpired(err) {
				return version, errRestart
			}
			return version, err
		}
	}
	defer wi.Stop()
	defer func() {
		if initial {
			last = ""
		}
	}()
	start := clk.Now()
	events := 0
	for {
		select {
		case <-ctx.Done():
			return version, ctx.Err()
		case ev, ok := <-wi.ResultChan():
			if !ok {
				if initial {
					return version, errors.New("the watch-list ended before its initial events did")
				}
				if events == 0 && clk.Since(start) < shortWatch {
					return version, errors.New("the watch ended at once")
				}
				return version, nil
			}
			events++
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if isExpired(err) {
					return version, errRestart
				}
				return version, err
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			if v := m.GetResourceVersion(); v != "" {
				version = v
			}
			switch ev.Type {
			case watch.Bookmark:
				if initial && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					_ = w.store.Replace(pending, version)
					initial, pending = false, nil
				}
			case watch.Added, watch.Modified:
				if initial {
					pending = append(pending, ev.Object)
				} else {
					_ = w.store.Update(ev.Object)
				}
			case watch.Deleted:
				if initial {
					// Not sent in initial events; keep the list exact anyway.
					continue
				}
				_ = w.store.Delete(ev.Object)
			}
		}
	}
}

// isExpired reports whether err says the resourceVersion asked for is
// not to be had: gone (410: Expired, or Gone from old API servers), or
// newer than the API server's (after its restore from a backup).
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}
