package processruntime

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/cgroupfs"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// execSandboxed runs an exec through the pod's init: a process of the
// sandbox entering the view of the container's process, with the
// container's identity, put in the container's cgroup before its command
// runs.
func (r *Runtime) execSandboxed(ctx context.Context, rc runningContainer, cmd []string, s Streams) (int, error) {
	sb := rc.proc.sb
	if sb.ended() || sb.conn == nil {
		return 0, errSandboxEnded
	}
	ps, waiting := r.processSpec(rc.p, rc.pod, rc.spec)
	if waiting != nil {
		return 0, errors.New(waiting.Message)
	}
	ps.Args = cmd
	ps.Mounts, ps.ReadOnlyRoot, ps.UnmaskedProc = nil, false, false
	ps.ViewOf = rc.proc.name

	stdio := sandbox.Stdio{TTY: s.TTY}
	var pipes *execPipes
	if !s.TTY {
		var err error
		if pipes, err = newExecPipes(s.Stdin != nil); err != nil {
			return 0, err
		}
		stdio.Stdout, stdio.Stderr, stdio.Stdin = pipes.stdout, pipes.stderr, pipes.stdin
	}
	name := execName()
	cctx, cancel := context.WithTimeout(ctx, sandboxWait)
	defer cancel()
	sp, err := sb.conn.Create(cctx, name, ps, stdio)
	if pipes != nil {
		// The process holds them now.
		pipes.closeProcessEnds()
	}
	if err != nil {
		if pipes != nil {
			pipes.closeSessionEnds()
		}
		if cctx.Err() != nil {
			r.abandonExec(sb, name)
		}
		return 0, err
	}
	sess := &execSession{pipes: pipes, terminal: sp.Terminal}
	if rc.proc.cgroup != "" {
		if err := cgroupfs.Write(filepath.Join(rc.proc.cgroup, "cgroup.procs"), strconv.Itoa(sp.HostPID)); err != nil {
			sess.closeEnds()
			r.abandonExec(sb, name)
			return 0, err
		}
	}
	if sp.Terminal != nil {
		r.applyInitialSize(ctx, s, sp.Terminal)
	}
	if err := sb.conn.Start(cctx, name); err != nil {
		sess.closeEnds()
		r.abandonExec(sb, name)
		return 0, err
	}
	sess.start(s)
	st, err := sb.conn.Wait(ctx, name)
	if err != nil {
		// ctx ended, or the sandbox (and the process with it) did.
		r.abandonExec(sb, name)
		sess.closeEnds()
		sess.end()
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case r.closed():
			return 0, ErrClosed
		}
		return 0, errSandboxEnded
	}
	r.drainOutput(&sess.out, sess.closeEnds)
	sess.end()
	r.forgetExec(sb, name)
	return st.Code, nil
}

// abandonExec kills an exec's process group and, in the background,
// drops the process from the init's table once it has ended.
func (r *Runtime) abandonExec(sb *podSandbox, name string) {
	r.abandon(sb, name)
	r.goWatcher(func() {
		if _, err := sb.conn.Wait(r.closingCtx, name); err == nil {
			r.forgetExec(sb, name)
		}
	})
}

// forgetExec drops an ended exec from the init's table.
func (r *Runtime) forgetExec(sb *podSandbox, name string) {
	ctx, cancel := context.WithTimeout(r.closingCtx, sandboxWait)
	defer cancel()
	_ = sb.conn.Forget(ctx, name)
}

// isExec reports whether a process of a sandbox is an exec (of this run
// or an earlier one) rather than a container's.
func isExec(name string) bool { return strings.HasPrefix(name, "exec/") }

// endLeftoverExecs kills, at Open, the execs an earlier run left running
// in a sandbox (their sessions went with that run), and drops them from
// the init's table once they have ended.
func (r *Runtime) endLeftoverExecs(sb *podSandbox, procs map[string]sandbox.ProcessState) {
	for name, ps := range procs {
		if !isExec(name) {
			continue
		}
		if ps.State == sandbox.StateExited {
			r.forgetExec(sb, name)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
		_ = sb.conn.Signal(ctx, name, syscall.SIGKILL)
		cancel()
		r.goWatcher(func() {
			if _, err := sb.conn.Wait(r.closingCtx, name); err == nil {
				r.forgetExec(sb, name)
			}
		})
	}
}
