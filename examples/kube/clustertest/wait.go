package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Client reads and watches the objects of one kind: a typed client of
// client-go, such as Admin().CoreV1().Pods(namespace) or
// Admin().AppsV1().StatefulSets(namespace).
type Client[T runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Condition is what WaitFor waits for an object to be.
type Condition[T runtime.Object] struct {
	// Description says what is waited for, in WaitFor's errors
	// ("Running", "rolled out").
	Description string
	// Met says whether obj meets the condition; obj is nil while the
	// object does not exist. An error ends the wait: the object can no
	// longer meet the condition (a pod waited to run has failed). It is
	// called from WaitFor's goroutine, and must not modify obj.
	Met func(obj T) (bool, error)
}

// Match returns the Condition that met says holds, described by
// description.
func Match[T runtime.Object](description string, met func(obj T) bool) Condition[T] {
	return Condition[T]{Description: description, Met: func(obj T) (bool, error) { return met(obj), nil }}
}

// retryDelay is how long WaitFor waits before it reads again an object
// whose read failed.
const retryDelay = 200 * time.Millisecond

// WaitFor waits until the object name, read and watched through client,
// meets cond, and returns it as it met it (nil for a condition met by an
// object that does not exist, as Gone's). It gives up when timeout has
// passed or ctx ends, or when cond returns an error, and says then what it
// waited for and what it saw last:
//
//	clustertest: StatefulSet "web" not ready after 1m0s; last seen: web replicas=3 ready=1 ...
//
// It reads the object once, then watches it (no polling), and reads it
// again whenever its watch ends. A read or watch the API server refuses is
// retried until the timeout; the last error is in the message.
func WaitFor[T runtime.Object](ctx context.Context, client Client[T], name string, cond Condition[T], timeout time.Duration) (T, error) {
	var zero T
	if client == nil || cond.Met == nil {
		return zero, errors.New("clustertest: WaitFor needs a client and a condition")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := waiter[T]{name: name, cond: cond}
	for {
		done, err := w.once(ctx, client)
		switch {
		case err != nil:
			return zero, w.fail(err, timeout)
		case done:
			return w.last, nil
		case w.failedRead == nil:
			continue // the watch ended: read again at once
		}
		w.lastErr, w.failedRead = w.failedRead, nil
		select {
		case <-ctx.Done():
			return zero, w.fail(ctx.Err(), timeout)
		case <-time.After(retryDelay):
		}
	}
}

// waiter is the state of one WaitFor.
type waiter[T runtime.Object] struct {
	name string
	cond Condition[T]
	// last is the object as last seen (nil: seen not to exist, or never
	// read); seen says whether it was read at all.
	last T
	seen bool
	// lastErr is the last error of a read or a watch; failedRead is the
	// error of the latest, when it failed.
	lastErr, failedRead error
}

// once reads the object and watches it until cond holds (true), cond
// fails or ctx ends (an error), or the read or the watch fails (false,
// with failedRead set: try again after retryDelay) or ends (false: try
// again).
func (w *waiter[T]) once(ctx context.Context, client Client[T]) (bool, error) {
	obj, err := client.Get(ctx, w.name, metav1.GetOptions{})
	resourceVersion := ""
	switch {
	case apierrors.IsNotFound(err):
		var zero T
		obj = zero
	case err != nil:
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		w.failedRead = err
		return false, nil
	default:
		if m, err := meta.Accessor(obj); err == nil {
			resourceVersion = m.GetResourceVersion()
		}
	}
	if done, err := w.see(obj); done || err != nil {
		return done, err
	}
	watcher, err := client.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", w.name).String(),
		ResourceVersion: resourceVersion,
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		w.failedRead = err
		return false, nil
	}
	defer watcher.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				return false, nil // the watch ended: read again
			}
			var obj T
			switch ev.Type {
			case watch.Added, watch.Modified:
				o, ok := ev.Object.(T)
				if !ok || !w.named(o) {
					continue
				}
				obj = o
			case watch.Deleted:
				if o, ok := ev.Object.(T); !ok || !w.named(o) {
					continue
				}
			case watch.Error:
				// Expired (410 Gone) or refused: read again.
				w.failedRead = apierrors.FromObject(ev.Object)
				return false, nil
			default:
				continue
			}
			if done, err := w.see(obj); done || err != nil {
				return done, err
			}
		}
	}
}

// named says whether obj is the object waited for (a watch's field
// selector may not be applied by every client, such as a fake one).
func (w *waiter[T]) named(obj T) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetName() == w.name
}

// see records obj as the last seen and checks the condition.
func (w *waiter[T]) see(obj T) (bool, error) {
	w.last, w.seen = obj, true
	return w.cond.Met(obj)
}

// fail returns WaitFor's error for err.
func (w *waiter[T]) fail(err error, timeout time.Duration) error {
	what := fmt.Sprintf("%s %q", kindOf[T](), w.name)
	if m, aerr := meta.Accessor(w.last); w.seen && aerr == nil && !isNil(w.last) && m.GetNamespace() != "" {
		what = fmt.Sprintf("%s %s/%s", kindOf[T](), m.GetNamespace(), w.name)
	}
	var reason string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		reason = fmt.Sprintf("not %s after %v", w.cond.Description, timeout)
	case errors.Is(err, context.Canceled):
		reason = fmt.Sprintf("not %s when the wait was canceled", w.cond.Description)
	default:
		reason = fmt.Sprintf("will not be %s: %v", w.cond.Description, err)
	}
	last := "nothing"
	if w.seen {
		last = Describe(w.last)
	}
	msg := fmt.Sprintf("clustertest: %s %s; last seen: %s", what, reason, last)
	if w.lastErr != nil {
		msg += fmt.Sprintf(" (last error: %v)", w.lastErr)
	}
	return errors.New(msg)
}

// kindOf returns the name of T's type: Pod for *v1.Pod.
func kindOf[T any]() string {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// isNil says whether obj is a nil pointer (or nil).
func isNil(obj any) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// maxDescribed bounds the JSON Describe gives an object of a kind it does
// not know.
const maxDescribed = 2048

// describeJSON is Describe's fallback: the object's status, or the whole
// object, as JSON, cut to maxDescribed bytes.
func describeJSON(obj any) string {
	var v any = obj
	if rv := reflect.ValueOf(obj); rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Struct {
		if status := rv.Elem().FieldByName("Status"); status.IsValid() {
			v = status.Interface()
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", obj)
	}
	if len(b) > maxDescribed {
		return string(b[:maxDescribed]) + "..."
	}
	return string(b)
}
