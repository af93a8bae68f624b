package processruntime

import (
	"context"
	"path/filepath"
	"syscall"
	"time"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// recoverSandboxed reads back, at Open, a pod that ran in a sandbox: it
// takes its ID range back, reconnects to its init if it still runs and
// asks it what it knows (List), then adopts the containers still running
// (their exits come through the init, with their codes), records how
// those that ended while no agent was connected ended, kills the execs
// whose sessions went with the earlier run, and kills the pod cleanly
// when its init cannot be reached. Without a sandbox in this run,
// or with another pod holding its ID range, the pod's sandbox is killed:
// this run cannot look after it.
func (r *Runtime) recoverSandboxed(p *podState, rec sandboxRecord, now time.Time) {
	sb := &podSandbox{rec: rec, gone: make(chan struct{})}
	p.sb = sb
	alive := rec.PID > 0 && rec.BootID == r.bootID && sameProcess(rec.PID, rec.StartTicks)
	kill := func(why string, err error) {
		r.log.Error(err, "Killing a pod's sandbox left by an earlier run: "+why, "pod", p.uid, "init", rec.PID)
		killIfSame(rec.PID, rec.StartTicks)
		alive = false
	}
	switch {
	case !alive:
	case r.sandboxes == nil:
		kill("this run has no sandboxes", nil)
	default:
		if err := r.sandboxes.reserve(rec.Slot, p.uid); err != nil {
			kill("its range of host IDs is taken", err)
		}
	}
	if !alive && r.sandboxes != nil {
		// Taken back all the same until the pod's cleanup: files of its
		// IDs may be left in its directories.
		_ = r.sandboxes.reserve(rec.Slot, p.uid)
	}
	procs := map[string]sandbox.ProcessState{}
	if alive {
		conn, err := sandbox.Dial(filepath.Join(p.dir, sandboxDir, "init.sock"))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
			var list []sandbox.ProcessState
			list, err = conn.List(ctx)
			cancel()
			for _, ps := range list {
				procs[ps.Name] = ps
			}
			if err != nil {
				conn.Close()
			} else {
				sb.conn = conn
			}
		}
		if err != nil {
			kill("its init does not answer", err)
		}
	}
	if alive {
		r.watchers.Add(1)
		go r.watchInit(p, sb)
		if sb.conn != nil {
			r.endLeftoverExecs(sb, procs)
		}
	} else {
		close(sb.gone)
	}
	for _, c := range p.containers {
		if c.rec.PID == 0 && !c.rec.Starting {
			r.killContainerCgroup(p.uid, c.rec.Name, c.rec.Cgroup)
			continue
		}
		name := procName(c.rec.Name, c.rec.Restarts)
		ps, known := procs[name]
		pid, startTicks := c.rec.PID, c.rec.StartTicks
		if c.rec.Starting && known && ps.HostPID > 0 {
			if st, err := readStat(ps.HostPID); err == nil {
				pid, startTicks = ps.HostPID, st.startTicks
			}
		}
		c.rec.Starting = false
		switch {
		case known && ps.State == sandbox.StateRunning && pid > 0:
			pr := &proc{pid: pid, pgid: pid, startTicks: startTicks, cgroup: c.rec.Cgroup, startedAt: c.rec.StartedAt, adopted: true, done: make(chan struct{}), sb: sb, name: name}
			pr.shim = &logShim{dir: containerLogDir(p.dir, c.rec.Name), instance: c.rec.Restarts}
			pr.id = containerID(pr.pid, pr.startTicks)
			c.rec.PID, c.rec.PGID, c.rec.StartTicks, c.rec.BootID = pid, pid, startTicks, r.bootID
			c.proc = pr
			r.persistLocked(p, c)
			r.log.Info("Adopted a container process from a previous run, through its pod's sandbox", "pod", p.uid, "container", c.rec.Name, "pid", pid)
			r.goWatcher(func() { r.reapSandboxed(p, c, pr) })
			continue
		case known && ps.State == sandbox.StateExited && ps.Exit != nil:
			exit := exitOf(ps.Exit.Code, ps.Exit.Signal)
			exit.StartedAt, exit.FinishedAt, exit.ID = c.rec.StartedAt, now, containerID(pid, startTicks)
			r.recordRecoveredExit(p, c, exit)
			if sb.conn != nil {
				ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
				_ = sb.conn.Forget(ctx, name)
				cancel()
			}
		case known && ps.State == sandbox.StateCreated:
			// The agent stopped between creating the process and starting
			// its command: it never ran.
			if sb.conn != nil {
				ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
				_ = sb.conn.Signal(ctx, name, syscall.SIGKILL)
				cancel()
			}
			r.recordRecoveredExit(p, c, ExitStatus{Code: 128, Reason: ReasonStartError, Message: "the agent stopped while starting the container", FinishedAt: now})
		default:
			r.recordRecoveredExit(p, c, ExitStatus{Code: 137, Reason: ReasonStatusUnknown, Message: "the process ended while the agent was not running", StartedAt: c.rec.StartedAt, FinishedAt: now, ID: containerID(pid, startTicks)})
		}
	}
}

// recordRecoveredExit records, at Open, the exit of a container whose
// process ended while no agent ran, after killing what it left in its
// cgroup.
func (r *Runtime) recordRecoveredExit(p *podState, c *container, exit ExitStatus) {
	r.killContainerCgroup(p.uid, c.rec.Name, c.rec.Cgroup)
	c.rec.LastExit = c.rec.Exit
	c.rec.Exit = &exit
	c.rec.PID, c.rec.PGID, c.rec.StartTicks = 0, 0, 0
	r.persistLocked(p, c)
}
