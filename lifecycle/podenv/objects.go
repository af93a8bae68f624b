package podenv

import (
	"context"
	"errors"
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Objects is how podkit's per-pod loops read the secrets and config maps a
// pod references: its environment here, the files of its volumes in
// lifecycle/volume. The agent backs it: with per-object watches of exactly
// the objects its pods reference (examples/kube/objectcache, the kubelet's
// strategy), with files (examples/nodeagent), or with anything else.
//
// Both methods are called from the goroutines of the runtime's hooks (for
// any pod, concurrently) and of lifecycle/volume's Run, and must be safe
// for concurrent use. They should answer from memory or within ctx; they
// must not call back into the Builder or the volume manager.
//
// An object that does not exist is an error for which
// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true (an optional
// reference then reads as empty); any other error is a failed read, which
// the caller reports and retries. The object returned is shared: callers
// read it and never modify it. A getter that panics is a bug the caller
// survives: the read fails with a message saying so.
type Objects interface {
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
}

// ObjectsFuncs adapts two functions to Objects. A nil field fails every
// read of its kind with ErrNoGetter (it never pretends the object is
// missing).
type ObjectsFuncs struct {
	Secret    func(ctx context.Context, namespace, name string) (*v1.Secret, error)
	ConfigMap func(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
}

// ErrNoGetter is the error of a read no getter can serve: a nil Objects,
// or a nil field of ObjectsFuncs.
var ErrNoGetter = errors.New("podenv: no getter for this kind of object")

// GetSecret calls f.Secret.
func (f ObjectsFuncs) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	if f.Secret == nil {
		return nil, ErrNoGetter
	}
	return f.Secret(ctx, namespace, name)
}

// GetConfigMap calls f.ConfigMap.
func (f ObjectsFuncs) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	if f.ConfigMap == nil {
		return nil, ErrNoGetter
	}
	return f.ConfigMap(ctx, namespace, name)
}

// VolumeFiles opens a file inside a volume of a pod, for fileKeyRef
// variables (a variable read from an env file that an init container
// wrote into an emptyDir). lifecycle/volume's Manager implements it; the
// file must be opened without following a symbolic link out of the
// volume. The caller closes the reader, and reads at most
// Options.MaxBytes of it.
//
// OpenVolumeFile is called from the goroutine of the runtime's hook that
// builds the environment, for any pod, concurrently.
type VolumeFiles interface {
	OpenVolumeFile(uid types.UID, volumeName, path string) (io.ReadCloser, error)
}

var (
	_ Objects = ObjectsFuncs{}
)
