package podconfig

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// PodSink receives the full snapshots of a config source. *Config
// implements it; a ManifestSource (or an agent's own source) sends to one.
type PodSink interface {
	// SetPods replaces everything source had with pods. The pods stay the
	// caller's: the sink copies what it keeps. An error other than ctx's
	// stops the source.
	SetPods(ctx context.Context, source string, pods []*v1.Pod) error
}

// PodSinkFunc adapts a function to a PodSink.
type PodSinkFunc func(ctx context.Context, source string, pods []*v1.Pod) error

// SetPods calls f.
func (f PodSinkFunc) SetPods(ctx context.Context, source string, pods []*v1.Pod) error {
	return f(ctx, source, pods)
}

var (
	_ PodSink = PodSinkFunc(nil)
	_ PodSink = (*Config)(nil)
)
