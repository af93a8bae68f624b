package main

import (
	"flag"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// logCapOptions cap each container's logs on disk, as the kubelet's
// containerLogMaxSize and containerLogMaxFiles do. Zero values take the
// runtime's defaults.
type logCapOptions struct {
	containerLogMaxSize  int64
	containerLogMaxFiles int
}

// register adds --container-log-max-size and --container-log-max-files.
func (o *logCapOptions) register(fs *flag.FlagSet) {
	o.containerLogMaxSize = processruntime.DefaultContainerLogMaxSize
	o.containerLogMaxFiles = processruntime.DefaultContainerLogMaxFiles
	fs.Var((*quantityFlag)(&o.containerLogMaxSize), "container-log-max-size", "the most a container's log file holds before its log rotates to a new file, as a `quantity` (10Mi, 500Ki, 1G); at least "+strconv.Itoa(processruntime.MinContainerLogMaxSize)+" bytes")
	fs.IntVar(&o.containerLogMaxFiles, "container-log-max-files", o.containerLogMaxFiles, "how many log `files` a container keeps, its current and previous runs together (at least 2): its logs never take more than this times --container-log-max-size")
}

// validate checks the flags' values.
func (o logCapOptions) validate() error {
	if o.containerLogMaxSize < processruntime.MinContainerLogMaxSize {
		return fmt.Errorf("--container-log-max-size must be at least %d bytes, got %d", processruntime.MinContainerLogMaxSize, o.containerLogMaxSize)
	}
	if o.containerLogMaxFiles < 2 {
		return fmt.Errorf("--container-log-max-files must be at least 2, got %d", o.containerLogMaxFiles)
	}
	return nil
}

// quantityFlag is a byte count given as a Kubernetes quantity.
type quantityFlag int64

func (q *quantityFlag) String() string {
	if q == nil {
		return ""
	}
	return resource.NewQuantity(int64(*q), resource.BinarySI).String()
}

func (q *quantityFlag) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a quantity such as 10Mi: %w", err)
	}
	n, ok := v.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("want a whole, non-negative number of bytes, got %s", s)
	}
	*q = quantityFlag(n)
	return nil
}
