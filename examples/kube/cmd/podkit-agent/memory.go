package main

import (
	"fmt"
	"runtime/debug"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/examples/kube/internal/binpaging"
)

// The agent's memory. Most of its resident memory is its binary: tens of
// MiB of client-go's code and read-only data, of which it runs a scattered
// part, but its start (protobuf's init reads samples of the binary, with
// the kernel's read-ahead) makes most of it resident; package binpaging
// advises random paging at init and releases those pages once the agent is
// set up (PODKIT_BINARY_PAGING=readahead keeps the kernel's way). The rest is the Go runtime's, whose garbage collector
// lets the heap grow to twice what is live (GOGC=100) unless a soft limit
// (--memory-limit, GOMEMLIMIT) holds it back.

// memoryLimitSetting applies --memory-limit: empty keeps GOMEMLIMIT's.
func memoryLimitSetting(limit string) error {
	if limit == "" {
		return nil
	}
	q, err := resource.ParseQuantity(limit)
	if err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("--memory-limit: %q is not a positive number of bytes", limit)
	}
	debug.SetMemoryLimit(n)
	return nil
}

// logPaging logs what package binpaging did at init.
func logPaging(log logr.Logger) {
	switch n, err := binpaging.Applied(); {
	case err != nil:
		log.Error(err, "The agent's binary keeps the kernel's read-ahead")
	case n == 0:
		log.V(1).Info("The agent's binary keeps the kernel's read-ahead", binpaging.EnvVar, "readahead")
	default:
		log.V(1).Info("The agent's binary is paged at random", "bytes", n)
	}
}

// releasePaging drops the binary's pages resident after the set-up
// (binpaging.Release), unless PODKIT_BINARY_PAGING says readahead.
func releasePaging(log logr.Logger) {
	if n, err := binpaging.Applied(); n == 0 || err != nil {
		return
	}
	n, err := binpaging.Release()
	if err != nil {
		log.Error(err, "The agent's binary keeps its pages")
		return
	}
	log.V(1).Info("Released the binary's pages resident after the set-up", "bytes", n)
}
