package podenv

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/event"
)

// DefaultMaxBytes is the default of Options.MaxBytes: 2 MiB, what Linux
// accepts for a process's arguments and environment together with the
// default 8 MiB stack (a quarter of it), so an environment this package
// builds is never refused for its size at exec.
const DefaultMaxBytes = 2 << 20

// Options configure a Builder. The zero value is valid.
type Options struct {
	// Recorder receives the builder's events (see ReasonInvalidEnvVarNames),
	// on the pod. Defaults to event.Discard.
	Recorder event.Recorder
	// Logger receives a getter's panic, with its stack, at error level.
	// Defaults to discarding.
	Logger logr.Logger
	// NodeAllocatable returns the node's allocatable resources: a
	// resourceFieldRef to a limit the container and the pod leave unset
	// reads as the node's allocatable, as the kubelet reads it. Called
	// once per Build that needs it, from Build's goroutine. Nil (the
	// default) reads such limits as 0.
	NodeAllocatable func() v1.ResourceList
	// ServiceEnv returns the service variables of a pod in namespace
	// (KUBERNETES_SERVICE_HOST, <NAME>_SERVICE_PORT, ... as the kubelet
	// makes them from the cluster's services; enableServiceLinks is the
	// pod's spec.enableServiceLinks, nil read as true, as the API
	// defaults it). They come after the container's own variables, which
	// win over them, and $(NAME) references see them. Called from Build's
	// goroutine; an error is a ConfigError (the kubelet too waits until it
	// can read the services). Nil (the default): no service variables.
	ServiceEnv func(ctx context.Context, namespace string, enableServiceLinks bool) (map[string]string, error)
	// VolumeFiles opens the env files of fileKeyRef variables. Nil (the
	// default): a fileKeyRef is a ConfigError saying so.
	VolumeFiles VolumeFiles
	// MaxBytes bounds what one Build, ExpandCommandAndArgs or
	// ExpandSubPathExpr call makes: the environment's names and values
	// (plus 2 bytes a variable, for "=" and the terminating NUL), or the
	// command and args, expanded; and the bytes read of one env file. A
	// breach is a ConfigError. Defaults to DefaultMaxBytes; negative is an
	// error.
	MaxBytes int
}

// Builder builds containers' environments. Create it with New; it is
// safe for concurrent use and starts nothing.
type Builder struct {
	objects         Objects
	recorder        event.Recorder
	logger          logr.Logger
	nodeAllocatable func() v1.ResourceList
	serviceEnv      func(context.Context, string, bool) (map[string]string, error)
	volumeFiles     VolumeFiles
	maxBytes        int
}

// New returns a Builder that reads secrets and config maps through
// objects. A nil objects is valid for an agent with no API: every
// reference to a secret or config map is then a ConfigError (an optional
// one too, as the kubelet without a client). The error says which option
// is invalid.
func New(objects Objects, opts Options) (*Builder, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("podenv: Options.MaxBytes is %d; want 0 (the default, %d) or more", opts.MaxBytes, DefaultMaxBytes)
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	return &Builder{
		objects:         objects,
		recorder:        event.OrDiscard(opts.Recorder),
		logger:          opts.Logger,
		nodeAllocatable: opts.NodeAllocatable,
		serviceEnv:      opts.ServiceEnv,
		volumeFiles:     opts.VolumeFiles,
		maxBytes:        opts.MaxBytes,
	}, nil
}
