package main

import (
	"context"

	"github.com/podkit/podkit/examples/kube/internal/background"
)

// component is one server of the control plane, running on a goroutine
// of this process.
type component struct {
	name string
	*background.Task
}

// goComponent runs the component name's run on a goroutine of its own.
func goComponent(name string, run func(ctx context.Context) error) *component {
	return &component{name: name, Task: background.Go(run)}
}
