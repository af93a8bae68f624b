// Package apiobject holds what podkit's per-pod loops need to trust the
// secrets and config maps an agent's getter returns: the API's size
// bound, checked again (a getter backed by files, or a bug, could return
// more), and a call of the getter that survives its panics. Both
// lifecycle/podenv (environment) and lifecycle/volume (files) read
// objects through it.
package apiobject

import (
	"context"
	"fmt"
	"runtime/debug"

	v1 "k8s.io/api/core/v1"
)

// MaxBytes is the most data one secret or config map may hold: the API
// server's limit (1 MiB). For a secret it counts the values (as the API
// does) and, separately, the keys; for a config map the keys and values
// of data and binaryData together (as the API does).
const MaxBytes = 1 << 20

// CheckSecret returns an error when s holds more than MaxBytes.
func CheckSecret(s *v1.Secret) error {
	values, keys := 0, 0
	for k, v := range s.Data {
		values += len(v)
		keys += len(k)
	}
	if values > MaxBytes || keys > MaxBytes {
		return fmt.Errorf("secret %s/%s holds %d bytes of data and %d of keys, more than the %d the API allows", s.Namespace, s.Name, values, keys, MaxBytes)
	}
	return nil
}

// CheckConfigMap returns an error when cm holds more than MaxBytes.
func CheckConfigMap(cm *v1.ConfigMap) error {
	n := 0
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	if n > MaxBytes {
		return fmt.Errorf("configmap %s/%s holds %d bytes, more than the %d the API allows", cm.Namespace, cm.Name, n, MaxBytes)
	}
	return nil
}

// PanicError is what Get returns when the getter panicked: a bug of the
// getter, which the caller survives and reports as a failed read.
type PanicError struct {
	// What names the call ("GetSecret default/db").
	What string
	// Value is what the getter panicked with, and Stack where.
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s panicked: %v", e.What, e.Value)
}

// SecretFunc and ConfigMapFunc read an object, as podenv.Objects's
// methods do.
type (
	SecretFunc    func(ctx context.Context, namespace, name string) (*v1.Secret, error)
	ConfigMapFunc func(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
)

// Secret reads the secret namespace/name through get, so that its
// caller can trust the result: a panic of get is a *PanicError, a nil
// secret with no error an error, a secret larger than MaxBytes an error,
// and a nil get the error of a node without a getter (in the kubelet's
// words for a kubelet without a client). An error of get (NotFound, ...)
// comes back as it is.
func Secret(ctx context.Context, get SecretFunc, namespace, name string) (*v1.Secret, error) {
	if get == nil {
		return nil, fmt.Errorf("couldn't get secret %v/%v, no getter for secrets", namespace, name)
	}
	s, err := call(ctx, "GetSecret "+namespace+"/"+name, func(ctx context.Context) (*v1.Secret, error) {
		return get(ctx, namespace, name)
	})
	if err == nil {
		err = CheckSecret(s)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ConfigMap is Secret for config maps.
func ConfigMap(ctx context.Context, get ConfigMapFunc, namespace, name string) (*v1.ConfigMap, error) {
	if get == nil {
		return nil, fmt.Errorf("couldn't get configMap %v/%v, no getter for config maps", namespace, name)
	}
	cm, err := call(ctx, "GetConfigMap "+namespace+"/"+name, func(ctx context.Context) (*v1.ConfigMap, error) {
		return get(ctx, namespace, name)
	})
	if err == nil {
		err = CheckConfigMap(cm)
	}
	if err != nil {
		return nil, err
	}
	return cm, nil
}

// call calls get and returns what it returns; a panic of get comes back
// as a *PanicError, and a nil object with no error as an error, so the
// caller never dereferences nil.
func call[T any](ctx context.Context, what string, get func(context.Context) (*T, error)) (obj *T, err error) {
	defer func() {
		if r := recover(); r != nil {
			obj, err = nil, &PanicError{What: what, Value: r, Stack: debug.Stack()}
		}
	}()
	obj, err = get(ctx)
	if err == nil && obj == nil {
		return nil, fmt.Errorf("%s returned neither an object nor an error", what)
	}
	return obj, err
}
