package action

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestExecOutcomes(t *testing.T) {
	boom := errors.New("no such container")
	for _, tc := range []struct {
		name    string
		runner  ExecRunner
		outcome Outcome
		output  string
		errText string
	}{
		{"exit 0 is a success", ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return []byte("fine\n"), 0, nil
		}), Success, "fine\n", ""},
		{"another exit code is a failure with the output", ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return []byte("not ready"), 3, nil
		}), Failure, "not ready", ""},
		{"an error wins over the exit code", ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return []byte("x"), 1, boom
		}), Unknown, "", "no such container"},
		{"a panic is an error", ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			panic("runner bug")
		}), Unknown, "", "exec runner panicked: runner bug"},
		{"no runner", nil, Unknown, "", ErrNoRunner.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls Calls
			res, done := Exec(context.Background(), &calls, tc.runner, "c1", []string{"true"}, time.Second)
			<-done
			calls.Wait()
			assert.Equal(t, tc.outcome, res.Outcome)
			assert.Equal(t, tc.output, res.Output)
			if tc.outcome == Failure {
				assert.Equal(t, 3, res.ExitCode)
			}
			if tc.errText == "" {
				assert.NoError(t, res.Err)
			} else {
				require.Error(t, res.Err)
				assert.Contains(t, res.Err.Error(), tc.errText)
			}
		})
	}
}

func TestExecPassesItsArguments(t *testing.T) {
	var got struct {
		id      string
		cmd     []string
		timeout time.Duration
	}
	r := ExecRunnerFunc(func(_ context.Context, id string, cmd []string, timeout time.Duration) ([]byte, int, error) {
		got.id, got.cmd, got.timeout = id, cmd, timeout
		return nil, 0, nil
	})
	var calls Calls
	_, done := Exec(context.Background(), &calls, r, "containerd://abc", []string{"cat", "/tmp/ready"}, 5*time.Second)
	<-done
	assert.Equal(t, "containerd://abc", got.id)
	assert.Equal(t, []string{"cat", "/tmp/ready"}, got.cmd)
	assert.Equal(t, 5*time.Second, got.timeout)
}

func TestExecOutputIsCapped(t *testing.T) {
	r := ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		return []byte(strings.Repeat("x", 3*MaxOutput)), 1, nil
	})
	var calls Calls
	res, _ := Exec(context.Background(), &calls, r, "c", []string{"yes"}, 0)
	assert.Len(t, res.Output, MaxOutput)
}

// A runner that ignores its ctx is abandoned at the timeout: Exec returns
// a timeout failure on the clock's time, done stays open until the runner
// returns, and Calls.Wait waits for it.
func TestExecAbandonsAHungRunnerAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		release := make(chan struct{})
		started := make(chan struct{})
		r := ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			close(started)
			<-release // ignores ctx
			return nil, 0, nil
		})
		var calls Calls
		ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
		defer cancel()
		type ret struct {
			res  Result
			done <-chan struct{}
		}
		got := make(chan ret, 1)
		go func() {
			res, done := Exec(ctx, &calls, r, "c", []string{"sleep", "60"}, time.Second)
			got <- ret{res, done}
		}()
		<-started
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Exec returned before its timeout")
		default:
		}
		clk.Step(time.Second)
		rt := <-got
		assert.Equal(t, Failure, rt.res.Outcome)
		assert.Equal(t, `command "sleep 60" timed out`, rt.res.Output)
		synctest.Wait()
		select {
		case <-rt.done:
			t.Fatal("done closed while the runner still runs")
		default:
		}
		waited := make(chan struct{})
		go func() {
			calls.Wait()
			close(waited)
		}()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Calls.Wait returned while the runner still runs")
		default:
		}
		close(release)
		<-rt.done
		<-waited
	})
}

// A runner that honours its ctx returns at the timeout, and that is a
// timeout failure too, not an error.
func TestExecRunnerThatHonoursTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		r := ExecRunnerFunc(func(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, int, error) {
			<-ctx.Done()
			return nil, -1, ctx.Err()
		})
		var calls Calls
		ctx, cancel := WithTimeout(context.Background(), clk, 2*time.Second)
		defer cancel()
		got := make(chan Result, 1)
		go func() {
			res, _ := Exec(ctx, &calls, r, "c", []string{"hang"}, 2*time.Second)
			got <- res
		}()
		synctest.Wait()
		clk.Step(2 * time.Second)
		res := <-got
		assert.Equal(t, Failure, res.Outcome)
		assert.Contains(t, res.Output, "timed out")
		calls.Wait()
	})
}

// A ctx ended otherwise than by the timeout (shutdown) makes the call an
// error: the result is not the container's.
func TestExecCutByShutdownIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := ExecRunnerFunc(func(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, int, error) {
			<-ctx.Done()
			return nil, 0, ctx.Err()
		})
		var calls Calls
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan Result, 1)
		go func() {
			res, _ := Exec(ctx, &calls, r, "c", []string{"x"}, 0)
			got <- res
		}()
		synctest.Wait()
		cancel()
		res := <-got
		assert.Equal(t, Unknown, res.Outcome)
		assert.ErrorIs(t, res.Err, context.Canceled)
		calls.Wait()
	})
}

func TestWithTimeoutOnTheFakeClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
	clk.Step(999 * time.Millisecond)
	assert.NoError(t, ctx.Err())
	clk.Step(time.Millisecond)
	assert.Error(t, ctx.Err())
	assert.True(t, TimedOut(ctx))
	cancel()

	ctx, cancel = WithTimeout(context.Background(), clk, time.Second)
	cancel()
	assert.False(t, TimedOut(ctx), "a cancel is not a timeout")
	assert.False(t, clk.HasWaiters(), "cancel stops the timer")

	ctx, cancel = WithTimeout(context.Background(), clk, 0)
	defer cancel()
	clk.Step(time.Hour)
	assert.NoError(t, ctx.Err(), "no timeout for 0")
}
