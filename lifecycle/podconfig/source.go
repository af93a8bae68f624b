package podconfig

import (
	"context"
	"errors"
)

// Source is a config source as an agent runs it: a name, and a loop that
// sends the source's full snapshots under that name. *ManifestSource
// implements it; lifecycle.Agent.AddSource runs one (NewSource makes one
// of a function).
type Source interface {
	// Source returns the name the source's snapshots are sent under
	// (mirror.ApiserverSource, mirror.FileSource, or an agent's own). It
	// never changes and is not empty.
	Source() string
	// Run sends full snapshots of the source's pods to sink, under
	// Source(), until ctx ends; it then returns nil or ctx's error. An
	// error returned before ctx ended says the source cannot go on (an
	// Agent then stops). It is called once, on a goroutine of its own.
	Run(ctx context.Context, sink PodSink) error
}

// NewSource returns a Source named name whose Run calls run: the adapter
// for an agent's own source, which need not be a type of its own. It
// returns an error, prefixed "podconfig: ", for an empty name or a nil
// run.
func NewSource(name string, run func(ctx context.Context, sink PodSink) error) (Source, error) {
	switch {
	case name == "":
		return nil, errors.New("podconfig: NewSource needs a source name, got \"\"")
	case run == nil:
		return nil, errors.New("podconfig: NewSource needs a run function, got nil")
	}
	return funcSource{name: name, run: run}, nil
}

// funcSource is the Source NewSource returns.
type funcSource struct {
	name string
	run  func(context.Context, PodSink) error
}

func (s funcSource) Source() string { return s.name }

func (s funcSource) Run(ctx context.Context, sink PodSink) error { return s.run(ctx, sink) }

var (
	_ Source = (*ManifestSource)(nil)
	_ Source = funcSource{}
)
