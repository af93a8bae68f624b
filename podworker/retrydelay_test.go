package podworker

import (
	"testing"
	"time"
)

// chainErr is an error tree made to be huge: each node unwraps to itself
// (width 1) or to itself twice (width 2), until its shared budget of
// Unwrap calls is spent. visits counts the nodes looked at; the node at
// visit deep (if set) carries a retry delay.
type chainErr struct {
	width  int
	budget *int
	visits *int
	deep   int
}

func (e chainErr) Error() string { return "chain" }

func (e chainErr) RetryDelay() time.Duration {
	*e.visits++
	if e.deep > 0 && *e.visits == e.deep {
		return time.Second
	}
	return time.Hour
}

func (e chainErr) Unwrap() []error {
	if *e.budget <= 0 {
		return nil
	}
	*e.budget--
	out := make([]error, e.width)
	for i := range out {
		out[i] = e
	}
	return out
}

// A cyclic or exploding error tree from a hook is looked at up to
// maxErrorNodes nodes, not followed forever (which would hold the engine's
// lock forever).
func TestRetryDelayOfBoundsTheSearch(t *testing.T) {
	for _, width := range []int{1, 2} {
		budget, visits := 100*maxErrorNodes, 0
		d, ok := retryDelayOf(chainErr{width: width, budget: &budget, visits: &visits, deep: 10 * maxErrorNodes})
		if visits > maxErrorNodes {
			t.Errorf("width %d: looked at %d nodes, want at most maxErrorNodes (%d)", width, visits, maxErrorNodes)
		}
		if !ok || d != time.Hour {
			t.Errorf("width %d: got %v, %v; want the delay of the nodes looked at (1h), not the one beyond the bound", width, d, ok)
		}
	}
}

// The plain Unwrap() error chain is bounded too.
type selfErr struct{ visits *int }

func (e selfErr) Error() string { return "self" }
func (e selfErr) Unwrap() error {
	*e.visits++
	if *e.visits > 100*maxErrorNodes {
		return nil
	}
	return e
}

func TestRetryDelayOfBoundsASelfUnwrappingError(t *testing.T) {
	visits := 0
	if _, ok := retryDelayOf(selfErr{&visits}); ok {
		t.Error("found a delay in an error that has none")
	}
	if visits > maxErrorNodes {
		t.Errorf("unwrapped %d times, want at most maxErrorNodes (%d)", visits, maxErrorNodes)
	}
}
