//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/unixsock"
)

// Launch says how Start starts a sandbox.
type Launch struct {
	// Socket is the path of the pod's control socket. Start creates it
	// (replacing what is there) and the init listens on it; Dial connects
	// to it. Required. Its directory must be the agent's alone: whoever
	// can connect controls the pod.
	Socket string
	// Log receives what the stages write (their errors). Defaults to
	// discarding it.
	Log *os.File
	// Run starts the setup process; the runtime starts it in the pod's
	// cgroup, which the init and every process of the pod then share.
	// Defaults to cmd.Start.
	Run func(cmd *exec.Cmd) error
	// Placed, when set, is called with the setup process's PID once it
	// runs, before it does anything: the runtime puts it in cgroup v1
	// hierarchies there. An error stops the start.
	Placed func(pid int) error
	// NetNS is the pod's network namespace (an open namespace file), for
	// Config.JoinNetNS.
	NetNS *os.File
	// Executable is the program the setup stage runs, and through it the
	// init and each container's stage (each runs the program it was
	// started from again): one linking this package, built from the same
	// source as the caller (the stages' protocol is theirs alone), such
	// as processruntime's cmd/podkit-stages, whose start costs less CPU
	// than a large agent's. An absolute path; "" (the default) is the
	// running program itself (/proc/self/exe).
	Executable string
	// Env is added to the environment of the setup stage and the init
	// ("KEY=value" each): the runtime's identifiers of the pod, so that a
	// scan of the process table finds the init with the pod's processes.
	// The init's environment is not the containers': they get their own.
	Env []string
}

// Start starts the sandbox c describes and returns its init's PID, once
// the init is ready to serve the control socket. The init is a child of
// the calling process (the setup stage starts it with CLONE_PARENT), which
// must reap it; it outlives the caller's exit as the caller's other
// children do. The error says what failed; nothing of the sandbox is left
// running then (an init that started is killed and reaped). ctx bounds
// the start.
func Start(ctx context.Context, c *Config, l Launch) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	cfg := *c
	if cfg.RootSize == 0 {
		cfg.RootSize = DefaultRootSize
	}
	if cfg.TmpSize == 0 {
		cfg.TmpSize = DefaultTmpSize
	}
	if l.Socket == "" {
		return 0, errors.New("sandbox: Launch.Socket is required")
	}
	exe := l.Executable
	if exe == "" {
		exe = selfExe
	} else if !filepath.IsAbs(exe) {
		return 0, fmt.Errorf("sandbox: Launch.Executable %q is not an absolute path", exe)
	}
	if c.JoinNetNS != (l.NetNS != nil) {
		return 0, errors.New("sandbox: Config.JoinNetNS needs Launch.NetNS, and only it")
	}
	listener, err := listen(l.Socket)
	if err != nil {
		return 0, err
	}
	defer listener.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	resR, resW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer resR.Close()
	defer resW.Close()
	log := l.Log
	if log == nil {
		if log, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return 0, err
		}
		defer log.Close()
	}
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       []string{"podkit-sandbox-setup"},
		Env:        append([]string{MarkerEnv + "=" + stageSetup, stageGORACE, stageGOMAXPROCS}, l.Env...),
		Dir:        "/",
		Stdout:     log,
		Stderr:     log,
		ExtraFiles: []*os.File{cfgR, resW, listener, l.NetNS},
		// A mount namespace of its own (where the pod's root is built),
		// and a process group of its own: a terminal's signals for the
		// agent do not reach it.
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setpgid: true},
	}
	run := l.Run
	if run == nil {
		run = (*exec.Cmd).Start
	}
	if err := run(cmd); err != nil {
		return 0, fmt.Errorf("sandbox: starting the setup stage: %w", err)
	}
	resW.Close()
	cfgR.Close()
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	initPID, err := setup(cmd, &cfg, cfgW, resR, l.Placed)
	if err != nil {
		_ = cmd.Process.Kill()
	}
	// Done once it reported: it exits by itself.
	_ = cmd.Wait()
	if err != nil {
		if initPID > 0 {
			killChild(initPID)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("sandbox: starting pod %s: %w", c.Name, ctx.Err())
		}
		return 0, fmt.Errorf("sandbox: starting pod %s: %w", c.Name, err)
	}
	return initPID, nil
}

// setup drives the setup stage: places it, sends the configuration and
// reads the result. It returns the init's PID as soon as it is known,
// with any error.
func setup(cmd *exec.Cmd, c *Config, cfgW, resR *os.File, placed func(int) error) (int, error) {
	if placed != nil {
		if err := placed(cmd.Process.Pid); err != nil {
			return 0, err
		}
	}
	err := json.NewEncoder(cfgW).Encode(c)
	cfgW.Close()
	if err != nil {
		return 0, fmt.Errorf("sending the configuration: %w", err)
	}
	initPID := 0
	sc := bufio.NewScanner(io.LimitReader(resR, 64<<10))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "init "):
			initPID, _ = strconv.Atoi(strings.TrimPrefix(line, "init "))
		case line == "ok":
			if initPID <= 0 {
				return 0, errors.New("the setup stage did not say which process is the init")
			}
			return initPID, nil
		case strings.HasPrefix(line, "error "):
			return initPID, errors.New(strings.TrimPrefix(line, "error "))
		}
	}
	return initPID, errors.New("the setup stage ended without a result (see the sandbox's log)")
}

// killChild kills and reaps a child of the caller.
func killChild(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
}

// listen creates the listening control socket at path.
func listen(path string) (*os.File, error) {
	f, err := unixsock.Listen(path, 8)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the control socket: %w", err)
	}
	return f, nil
}
