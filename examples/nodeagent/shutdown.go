package main

import (
	"context"
	"fmt"
	"time"

	"github.com/podkit/podkit/lifecycle"
)

// shutdownNode terminates every pod within budget (critical pods last),
// then runs one last housekeeping pass, which kills what no worker knows
// (leftovers of a previous run the sync loop has not reached yet). It
// returns every problem it met; both runtimes' agents end with it.
func shutdownNode(h *lifecycle.Handler, budget time.Duration) []error {
	var errs []error
	report, err := h.ShutdownNode(context.Background(), lifecycle.ShutdownOptions{GracePeriod: budget})
	if err != nil {
		errs = append(errs, fmt.Errorf("node shutdown: %w", err))
	}
	for _, p := range report.NotTerminated {
		errs = append(errs, fmt.Errorf("pod %s was not terminated", p.FullName))
	}
	if err := h.Housekeeping(context.Background()); err != nil {
		errs = append(errs, err)
	}
	return errs
}
