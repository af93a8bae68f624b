// Package podenvtest holds fakes for tests of code that reads secrets and
// config maps through podenv.Objects (and so lifecycle/volume too).
package podenvtest

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podkit/podkit/lifecycle/podenv"
)

// Objects is an in-memory podenv.Objects: the secrets and config maps a
// test sets, by namespace and name. A missing object is the API's
// NotFound error (secret "name" not found), as a kubelet's managers
// return it. Err, when set for a name, is returned instead of the object.
// It counts the reads of each object. Safe for concurrent use; the zero
// value is empty and ready.
type Objects struct {
	mu         sync.Mutex
	secrets    map[string]*v1.Secret
	configMaps map[string]*v1.ConfigMap
	errs       map[string]error
	reads      map[string]int
}

var _ podenv.Objects = (*Objects)(nil)

// Kinds of object, as Reads and SetError name them.
const (
	KindSecret    = "secret"
	KindConfigMap = "configmap"
)

func key(kind, namespace, name string) string { return kind + ":" + namespace + "/" + name }

// SetSecret stores s (a copy), replacing the secret of its namespace and
// name. StringData is merged into Data as the API server does.
func (o *Objects) SetSecret(s *v1.Secret) {
	s = s.DeepCopy()
	for k, v := range s.StringData {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.secrets == nil {
		o.secrets = map[string]*v1.Secret{}
	}
	o.secrets[key(KindSecret, s.Namespace, s.Name)] = s
}

// SetConfigMap stores cm (a copy), replacing the config map of its
// namespace and name.
func (o *Objects) SetConfigMap(cm *v1.ConfigMap) {
	cm = cm.DeepCopy()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.configMaps == nil {
		o.configMaps = map[string]*v1.ConfigMap{}
	}
	o.configMaps[key(KindConfigMap, cm.Namespace, cm.Name)] = cm
}

// Delete removes the object of kind (KindSecret or KindConfigMap).
func (o *Objects) Delete(kind, namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.secrets, key(kind, namespace, name))
	delete(o.configMaps, key(kind, namespace, name))
}

// SetError makes reads of the object of kind fail with err (nil: succeed
// again).
func (o *Objects) SetError(kind, namespace, name string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[string]error{}
	}
	if err == nil {
		delete(o.errs, key(kind, namespace, name))
		return
	}
	o.errs[key(kind, namespace, name)] = err
}

// Reads returns how many times the object of kind was read.
func (o *Objects) Reads(kind, namespace, name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads[key(kind, namespace, name)]
}

// GetSecret returns the secret, shared (do not modify it).
func (o *Objects) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := o.readLocked(KindSecret, namespace, name)
	if err := o.errs[k]; err != nil {
		return nil, err
	}
	if s, ok := o.secrets[k]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: KindSecret}, name)
}

// GetConfigMap returns the config map, shared (do not modify it).
func (o *Objects) GetConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := o.readLocked(KindConfigMap, namespace, name)
	if err := o.errs[k]; err != nil {
		return nil, err
	}
	if cm, ok := o.configMaps[k]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: KindConfigMap}, name)
}

// readLocked counts a read and returns the object's key. o.mu must be held.
func (o *Objects) readLocked(kind, namespace, name string) string {
	k := key(kind, namespace, name)
	if o.reads == nil {
		o.reads = map[string]int{}
	}
	o.reads[k]++
	return k
}
