package processruntime

import (
	"sync"
	"syscall"
)

// recoverState loads the state directory: adopts live processes, records the
// others as exited with an unknown code, kills what dead containers left
// behind, and reads tombstones back.
func (r *Runtime) recoverState() {
	loaded, errs := loadState(r.podsDir)
	for _, err := range errs {
		r.log.Error(err, "Damaged state; its pod is kept for housekeeping to remove")
	}
	now := r.clock.Now()
	var scanned []Process
	scanOnce := sync.OnceValue(func() error {
		var err error
		scanned, err = ScanProcesses(nil)
		return err
	})
	for _, lp := range loaded {
		p := &podState{uid: lp.pod.UID, namespace: lp.pod.Namespace, name: lp.pod.Name, dir: lp.dir, startedAt: lp.pod.StartedAt, containers: map[string]*container{}}
		r.pods[p.uid] = p
		if srec, ok := readSandboxRecord(lp.dir); ok {
			for _, rec := range lp.containers {
				p.containers[rec.Name] = &container{rec: rec}
			}
			r.recoverSandboxed(p, srec, now)
			r.recoverTombstone(p, lp)
			continue
		}
		for _, rec := range lp.containers {
			c := &container{rec: rec}
			p.containers[rec.Name] = c
			if rec.Starting {
				// The agent died while starting this container: find its
				// process, if it started, by its environment.
				c.rec.Starting = false
				if err := scanOnce(); err != nil {
					r.log.Error(err, "Cannot scan for a container started by a previous run", "pod", p.uid, "container", rec.Name)
				}
				for _, sp := range scanned {
					if sp.Leader && sp.PodUID == string(p.uid) && sp.Container == rec.Name {
						c.rec.PID, c.rec.PGID, c.rec.StartTicks, c.rec.BootID, c.rec.StartedAt = sp.PID, sp.PGID, sp.StartTicks, r.bootID, now
						c.rec.Cgroup = r.cgroupOfProcess(sp.PID)
					}
				}
			}
			if c.rec.PID == 0 {
				r.killContainerCgroup(p.uid, rec.Name, rec.Cgroup)
				continue
			}
			if c.rec.BootID == r.bootID && sameProcess(c.rec.PID, c.rec.StartTicks) {
				pr := &proc{pid: c.rec.PID, pgid: c.rec.PGID, startTicks: c.rec.StartTicks, cgroup: c.rec.Cgroup, startedAt: c.rec.StartedAt, adopted: true, done: make(chan struct{})}
				// Its log shim, started by the previous run, still drains it.
				pr.shim = &logShim{dir: containerLogDir(p.dir, rec.Name), instance: c.rec.Restarts}
				pr.id = containerID(pr.pid, pr.startTicks)
				c.proc = pr
				r.log.Info("Adopted a container process from a previous run", "pod", p.uid, "container", rec.Name, "pid", pr.pid)
				r.watchers.Add(1)
				go r.watchAdopted(p, c, pr)
				continue
			}
			// The process is gone: its exit code is lost. What it left
			// behind is killed: its group, its cgroup, and what carries its
			// pod and container in its environment.
			if c.rec.BootID == r.bootID {
				r.killLeftovers(c.rec.PGID, c.rec.StartTicks)
			}
			r.killContainerCgroup(p.uid, rec.Name, rec.Cgroup)
			if err := scanOnce(); err != nil {
				r.log.Error(err, "Cannot scan for what a dead container left behind", "pod", p.uid, "container", rec.Name)
			}
			for _, sp := range scanned {
				if sp.PodUID == string(p.uid) && sp.Container == rec.Name && killIfSame(sp.PID, sp.StartTicks) {
					r.log.Info("Killed a process a dead container left behind", "pod", p.uid, "container", rec.Name, "pid", sp.PID)
				}
			}
			c.rec.LastExit = c.rec.Exit
			c.rec.Exit = &ExitStatus{Code: 137, Reason: ReasonStatusUnknown, Message: "the process ended while the agent was not running", StartedAt: c.rec.StartedAt, FinishedAt: now, ID: containerID(c.rec.PID, c.rec.StartTicks)}
			c.rec.PID, c.rec.PGID, c.rec.StartTicks = 0, 0, 0
			r.persistLocked(p, c)
		}
		r.recoverTombstone(p, lp)
	}
	r.killUnrecordedCgroups()
}

// recoverTombstone marks a pod read back at Open cleaned up when its
// record says so and nothing of it runs.
func (r *Runtime) recoverTombstone(p *podState, lp loadedPod) {
	if !lp.pod.CleanedUp {
		return
	}
	if procs := p.procsLocked(); len(procs) > 0 {
		// Cannot happen unless the directory was tampered with: treat it as
		// a live pod, so housekeeping kills it if unwanted.
		r.log.Info("A cleaned-up pod has running processes; it is treated as a running pod", "pod", p.uid, "processes", len(procs))
		return
	}
	p.cleanedUp, p.stopped, p.earlier = true, true, true
}

// killLeftovers SIGKILLs what remains of the group led by the process
// (pgid, leaderStart), if anything.
func (r *Runtime) killLeftovers(pgid int, leaderStart uint64) {
	if pgid <= 1 {
		return
	}
	members, err := groupMembers(pgid, leaderStart)
	if err != nil {
		r.log.Error(err, "Cannot look for processes left behind", "pgid", pgid)
		return
	}
	if len(members) > 0 {
		if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
			r.log.Error(err, "Cannot kill processes left behind", "pgid", pgid, "pids", members)
		}
	}
}

// watchAdopted polls the process table until the adopted process ends.
func (r *Runtime) watchAdopted(p *podState, c *container, pr *proc) {
	defer r.watchers.Done()
	t := r.clock.NewTicker(r.poll)
	defer t.Stop()
	for sameProcess(pr.pid, pr.startTicks) {
		select {
		case <-t.C():
		case <-r.closing:
			return
		}
	}
	pr.mu.Lock()
	r.killLeftovers(pr.pgid, pr.startTicks)
	r.killContainerLeftovers(p.uid, c.rec.Name, pr.cgroup)
	pr.reaped = true
	pr.mu.Unlock()
	r.awaitLogShim(pr.shim)
	r.exited(p, c, pr, ExitStatus{
		Code:      137,
		Reason:    ReasonStatusUnknown,
		Message:   "the process was adopted from a previous run of the agent, so its exit code is unknown",
		StartedAt: pr.startedAt, FinishedAt: r.clock.Now(), ID: pr.id,
	})
}
