package processruntime_test

import (
	"testing"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// openRuntime opens a runtime over a fresh state directory (unless opts
// names one) and closes it when the test ends.
func openRuntime(t *testing.T, opts processruntime.Options) *processruntime.Runtime {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	rt, err := processruntime.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}
