//go:build linux

package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/cgroupfs"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/osthread"
)

// The spawner stage: the stage program run once for a runtime (Spawner),
// as host root, that sets up each pod's sandbox it is asked for. A setup
// runs on an OS thread of the spawner's own (osthread), which takes a
// filesystem context and mount namespace of its own (the spawner's other
// threads keep the host's), enters the pod's network namespace when the
// pod joins one, builds the pod's root there (rootfs_linux.go), starts the
// init from it with the pod's namespaces and ID maps, as a child of the
// runtime (CLONE_PARENT), waits for the init to be ready, and ends, with
// its namespace (the init holds its own copy). A pod's start thus costs no
// Go program's start-up of its own but the init's; a fork of the small
// spawner, not of the agent, gives the init its user namespace (Go forks a
// whole address space for that, not a vfork).
//
// The spawner's descriptor 3 is its end of the runtime's connection
// (protocol.go: spawn, answered by init then reply). It serves until the
// runtime closes that connection, or ends.
const spawnerFDControl = 3

// The init's descriptors, from the setup: 0 is /dev/null, 1 and 2 the
// sandbox's log.
const (
	initFDListener = 3 // the pod's control socket, listening
	initFDConfig   = 4 // initConfig, JSON, to end of file
	initFDReady    = 5 // "ok" once the pod's root is in place, or "error <text>"
)

// initConfig is what the init reads.
type initConfig struct {
	Config Config `json:"config"`
	// Root is the pod's root as the setup built it.
	Root string `json:"root"`
}

// stageGORACE keeps a stage built with -race (a test binary) from
// sleeping a second as it exits.
const stageGORACE = "GORACE=atexit_sleep_ms=0"

// stageGOMAXPROCS runs a stage on one P: none of them computes in
// parallel, and each further P costs a starting program threads, stacks
// and their page faults (page faults are most of a stage's start).
const stageGOMAXPROCS = "GOMAXPROCS=1"

// maxSetups bounds the setups a spawner runs at once; further requests
// wait for one to end.
const maxSetups = 16

func spawnerMain() error {
	syscall.CloseOnExec(spawnerFDControl)
	c, err := fileConn(spawnerFDControl)
	if err != nil {
		return fmt.Errorf("using the runtime's connection: %w", err)
	}
	var wmu sync.Mutex
	send := func(m *message) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = writeFrame(c, m, nil)
	}
	slots := make(chan struct{}, maxSetups)
	var setups sync.WaitGroup
	for {
		m, files, err := readFrame(c)
		if err != nil {
			// The runtime closed its end (Close, or its end): the setups
			// under way finish and say so (each within stageTimeout), so
			// that the runtime kills the inits it no longer wants, and the
			// spawner ends.
			setups.Wait()
			return nil
		}
		if m.Op != opSpawn || m.Sandbox == nil || len(files) < 2 || len(files) > 3 || (len(files) == 3) != m.Sandbox.Config.JoinNetNS {
			closeFiles(files)
			send(&message{Op: opReply, Seq: m.Seq, Error: fmt.Sprintf("spawn needs a sandbox and 2 descriptors (3 to join a network namespace); got %q with %d", m.Op, len(files))})
			continue
		}
		slots <- struct{}{}
		setups.Add(1)
		osthread.Discarded(func() {
			defer setups.Done()
			defer func() { <-slots }()
			defer closeFiles(files)
			var netns *os.File
			if len(files) == 3 {
				netns = files[2]
			}
			started := func(pid int) { send(&message{Op: opInit, Seq: m.Seq, PID: pid}) }
			pid, err := setup(m.Sandbox, files[0], files[1], netns, started)
			reply := &message{Op: opReply, Seq: m.Seq, PID: pid}
			if err != nil {
				reply.PID, reply.Error = 0, oneLine(err)
			}
			send(reply)
		})
	}
}

// setup builds the pod's root and starts its init, on the calling thread,
// which must be locked and discarded after (its filesystem context,
// namespaces and cgroup v1 places are the pod's). started is told the
// init's PID as soon as it runs: the init is the runtime's child, which
// kills and reaps it should the setup fail after. It returns the init's
// PID once the init is ready.
func setup(r *spawnRequest, listener, log, netns *os.File, started func(pid int)) (int, error) {
	c := &r.Config
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return 0, fmt.Errorf("a mount namespace for the pod's root: %w", err)
	}
	if c.JoinNetNS {
		// The init started from this thread inherits its network
		// namespace, and the net.* sysctls written from it are the pod's
		// (/proc/sys/net shows the writer's namespace).
		if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
			return 0, fmt.Errorf("entering the pod's network namespace: %w", err)
		}
		if err := setSysctls(c.Sysctls, true, ""); err != nil {
			return 0, err
		}
	}
	root, err := buildRoot(c)
	if err != nil {
		return 0, fmt.Errorf("building the pod's root: %w", err)
	}
	pid, ready, err := startInit(r, root, listener, log)
	if pid > 0 {
		started(pid)
	}
	if err != nil {
		return 0, fmt.Errorf("starting the pod's init: %w", err)
	}
	defer ready.Close()
	if err := ready.SetReadDeadline(time.Now().Add(stageTimeout)); err != nil {
		return 0, err
	}
	line, _ := bufio.NewReader(io.LimitReader(ready, 4096)).ReadString('\n')
	switch line = strings.TrimSpace(line); {
	case line == "ok":
		return pid, nil
	case strings.HasPrefix(line, "error "):
		return 0, errors.New(strings.TrimPrefix(line, "error "))
	}
	return 0, errors.New("the pod's init ended while setting up, or did not say it was ready in time (the sandbox's log says why)")
}

// rlimitNPROC is RLIMIT_NPROC (the same number on every architecture
// Linux runs Go on).
const rlimitNPROC = 6

// startInit starts the pod's init in its namespaces and cgroups, as a
// child of the runtime, from the calling thread (its mount namespace holds
// the pod's root, its working directory), and hands it its configuration.
// It returns the init's PID (once it started, whatever failed after) and
// the pipe it reports readiness on.
func startInit(r *spawnRequest, root string, listener, log *os.File) (int, *os.File, error) {
	c := &r.Config
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	defer readyW.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		readyR.Close()
		return 0, nil, err
	}
	defer devNull.Close()
	// The init starts in the pod's root: its working directory is the
	// copy of root in its own mount namespace, which it reaches no other
	// way (the directories above are host root's alone).
	if err := unix.Chdir(root); err != nil {
		readyR.Close()
		return 0, nil, err
	}
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_PARENT)
	if !c.HostPID {
		flags |= syscall.CLONE_NEWPID
	}
	if !c.HostIPC {
		flags |= syscall.CLONE_NEWIPC
	}
	if !c.HostNetwork {
		flags |= syscall.CLONE_NEWUTS
		if !c.JoinNetNS {
			flags |= syscall.CLONE_NEWNET
		}
	}
	sys := &syscall.SysProcAttr{Cloneflags: flags, Setsid: true}
	if c.HostID != 0 {
		sys.Cloneflags |= syscall.CLONE_NEWUSER
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(c.HostID), Size: IDsPerPod}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(c.HostID), Size: IDsPerPod}}
		sys.GidMappingsEnableSetgroups = true
		// Root of the user namespace before the execve, so the init keeps
		// the namespace's capabilities across it.
		sys.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	attr := &os.ProcAttr{
		// Its own stage's variables and the runtime's (Launch.Env):
		// never the spawner's.
		Env:   append([]string{MarkerEnv + "=" + stageInit, stageGORACE, stageGOMAXPROCS}, r.Env...),
		Files: []*os.File{devNull, log, log, listener, cfgR, readyW},
		Sys:   sys,
	}
	joined := cgroupfs.JoinThread(r.JoinTasks, r.LeaveTasks)
	pid, err := startIn(r.Cgroup, attr)
	if joined {
		cgroupfs.LeaveThread(r.LeaveTasks)
	}
	if err != nil {
		readyR.Close()
		return pid, nil, err
	}
	fail := func(err error) (int, *os.File, error) {
		readyR.Close()
		return pid, nil, err
	}
	if !joined {
		// Where the thread could not join them: moved at once, before it
		// reads its configuration, so before it starts anything.
		for _, tasks := range r.JoinTasks {
			if err := cgroupfs.Write(filepath.Join(filepath.Dir(tasks), "cgroup.procs"), strconv.Itoa(pid)); err != nil {
				return fail(fmt.Errorf("putting the init in %s: %w", filepath.Dir(tasks), err))
			}
		}
	}
	if c.MaxProcs > 0 {
		// Before the init reads its configuration, so before it starts
		// anything: the pod's processes inherit it.
		lim := &unix.Rlimit{Cur: c.MaxProcs, Max: c.MaxProcs}
		if err := unix.Prlimit(pid, rlimitNPROC, lim, nil); err != nil {
			return fail(fmt.Errorf("setting RLIMIT_NPROC: %w", err))
		}
	}
	if err := json.NewEncoder(cfgW).Encode(initConfig{Config: *c, Root: root}); err != nil {
		return fail(fmt.Errorf("sending the init its configuration: %w", err))
	}
	return pid, readyR, nil
}

// startIn starts the init as attr describes, born in the cgroup v2
// directory dir (clone3's CLONE_INTO_CGROUP) when dir is set, or moved
// there at once where the kernel cannot clone into a cgroup. On an error
// after the init started, it kills it and returns its PID too: the
// runtime, its parent, reaps it.
func startIn(dir string, attr *os.ProcAttr) (int, error) {
	start := func(attr *os.ProcAttr) (int, error) {
		p, err := os.StartProcess(selfExe, []string{"podkit-sandbox-init"}, attr)
		if err != nil {
			return 0, err
		}
		pid := p.Pid
		// The runtime reaps it (CLONE_PARENT), by its PID.
		_ = p.Release()
		return pid, nil
	}
	if dir == "" {
		return start(attr)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("opening the pod's cgroup: %w", err)
	}
	sys := *attr.Sys
	sys.UseCgroupFD, sys.CgroupFD = true, fd
	into := *attr
	into.Sys = &sys
	pid, err := start(&into)
	unix.Close(fd)
	if err == nil || !cgroupfs.CloneIntoUnsupported(err) {
		return pid, err
	}
	if pid, err = start(attr); err != nil {
		return 0, err
	}
	if err := cgroupfs.Write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return pid, fmt.Errorf("putting the init in its cgroup: %w", err)
	}
	return pid, nil
}

// oneLine keeps an error's text on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// setSysctls writes the sysctls of the pod's network namespace (net) or
// the others (IPC's), under the proc mount at procRoot ("" for /proc).
func setSysctls(sysctls map[string]string, net bool, procRoot string) error {
	if procRoot == "" {
		procRoot = "/proc"
	}
	for k, v := range sysctls {
		if strings.HasPrefix(k, "net.") != net {
			continue
		}
		if err := os.WriteFile(procRoot+"/sys/"+strings.ReplaceAll(k, ".", "/"), []byte(v), 0); err != nil {
			return fmt.Errorf("setting sysctl %s: %w", k, err)
		}
	}
	return nil
}
