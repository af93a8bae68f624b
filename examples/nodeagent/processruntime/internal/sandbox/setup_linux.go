//go:build linux

package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The setup stage: the agent's executable run again as host root, in a
// mount namespace of its own (CLONE_NEWNS) and nothing else new. It builds
// the pod's root there (rootfs_linux.go), starts the init from it with the
// pod's namespaces and ID maps, as a child of the agent (CLONE_PARENT),
// waits for the init to be ready, and exits. Its descriptors, from Start:
const (
	setupFDConfig   = 3 // the Config, JSON, to end of file
	setupFDResult   = 4 // what it reports: "init <pid>", then "ok" or "error <text>"
	setupFDListener = 5 // the pod's control socket, listening
	setupFDNetNS    = 6 // the pod's network namespace, with Config.JoinNetNS
)

// The init's descriptors, from the setup stage: 0 is /dev/null, 1 and 2
// the sandbox's log.
const (
	initFDListener = 3 // the pod's control socket, listening
	initFDConfig   = 4 // initConfig, JSON, to end of file
	initFDReady    = 5 // "ok" once the pod's root is in place, or "error <text>"
)

// initConfig is what the init reads.
type initConfig struct {
	Config Config `json:"config"`
	// Root is the pod's root as the setup stage built it.
	Root string `json:"root"`
}

// stageGORACE keeps a stage built with -race (a test binary) from
// sleeping a second as it exits.
const stageGORACE = "GORACE=atexit_sleep_ms=0"

// stageGOMAXPROCS runs a stage on one P: none of them computes in
// parallel, and each further P costs a starting program threads, stacks
// and their page faults (page faults are most of a stage's start).
const stageGOMAXPROCS = "GOMAXPROCS=1"

func setupMain() error {
	result := os.NewFile(setupFDResult, "result")
	report := func(format string, args ...any) {
		fmt.Fprintf(result, format+"\n", args...)
	}
	for _, fd := range []int{setupFDConfig, setupFDResult, setupFDListener} {
		syscall.CloseOnExec(fd)
	}
	var c Config
	if err := json.NewDecoder(io.LimitReader(os.NewFile(setupFDConfig, "config"), maxFrame)).Decode(&c); err != nil {
		report("error reading the sandbox's configuration: %v", oneLine(err))
		return nil
	}
	if err := c.Validate(); err != nil {
		report("error %v", oneLine(err))
		return nil
	}
	if c.JoinNetNS {
		// This thread (the main one, locked while package inits run) enters
		// the pod's network namespace: the init it forks inherits it, and
		// the net.* sysctls written here are the pod's. The stage's other
		// threads stay in the host's; none of them forks.
		// (Descriptor 6 is only the namespace's when it was passed: without,
		// it is closed at the start and may be the Go runtime's by now.)
		err := unix.Setns(setupFDNetNS, unix.CLONE_NEWNET)
		unix.Close(setupFDNetNS)
		if err != nil {
			report("error entering the pod's network namespace: %v", oneLine(err))
			return nil
		}
		if err := setSysctls(c.Sysctls, true, ""); err != nil {
			report("error %v", oneLine(err))
			return nil
		}
	}
	root, err := buildRoot(&c)
	if err != nil {
		report("error building the pod's root: %v", oneLine(err))
		return nil
	}
	if c.MaxProcs > 0 {
		// Inherited by the init and everything it starts.
		lim := &syscall.Rlimit{Cur: c.MaxProcs, Max: c.MaxProcs}
		if err := syscall.Setrlimit(rlimitNPROC, lim); err != nil {
			report("error setting RLIMIT_NPROC: %v", oneLine(err))
			return nil
		}
	}
	pid, ready, err := startInit(&c, root)
	if pid != 0 {
		// Reported first, so the agent can reap or kill it, whatever
		// follows.
		report("init %d", pid)
	}
	if err != nil {
		report("error starting the pod's init: %v", oneLine(err))
		return nil
	}
	line, _ := bufio.NewReader(io.LimitReader(ready, 4096)).ReadString('\n')
	switch line = strings.TrimSpace(line); {
	case line == "ok":
		report("ok")
	case strings.HasPrefix(line, "error "):
		report("%s", line)
	default:
		report("error the pod's init ended while setting up (its log says why)")
	}
	return nil
}

// rlimitNPROC is RLIMIT_NPROC (the same number on every architecture
// Linux runs Go on).
const rlimitNPROC = 6

// startInit starts the pod's init in its namespaces, as a child of the
// agent, and hands it its configuration. It returns the init's PID and
// the pipe it reports readiness on.
func startInit(c *Config, root string) (int, *os.File, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	defer cfgR.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		cfgW.Close()
		return 0, nil, err
	}
	defer readyW.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		cfgW.Close()
		return 0, nil, err
	}
	defer devNull.Close()
	// The init starts in the pod's root: its working directory is the
	// copy of root in its own mount namespace, which it reaches no other
	// way (the directories above are host root's alone).
	if err := unix.Chdir(root); err != nil {
		cfgW.Close()
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
	// The init's environment is the setup stage's (Launch.Env), but for
	// the stage it runs.
	env := []string{MarkerEnv + "=" + stageInit}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, MarkerEnv+"=") {
			env = append(env, kv)
		}
	}
	proc, err := os.StartProcess(selfExe, []string{"podkit-sandbox-init"}, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devNull, os.Stderr, os.Stderr, os.NewFile(setupFDListener, "listener"), cfgR, readyW},
		Sys:   sys,
	})
	if err != nil {
		cfgW.Close()
		readyR.Close()
		return 0, nil, err
	}
	// The init is the agent's child (CLONE_PARENT): the agent reaps it.
	pid := proc.Pid
	_ = proc.Release()
	err = json.NewEncoder(cfgW).Encode(initConfig{Config: *c, Root: root})
	cfgW.Close()
	if err != nil {
		readyR.Close()
		return pid, nil, err
	}
	return pid, readyR, nil
}

// oneLine keeps an error's text on one line of the result.
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
