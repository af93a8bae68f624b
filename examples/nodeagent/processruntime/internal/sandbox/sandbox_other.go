//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// errNotLinux is every stage's and call's error off Linux.
var errNotLinux = errors.New("sandbox: only Linux has the namespaces a sandbox needs")

func setupMain() error     { return errNotLinux }
func initMain() error      { return errNotLinux }
func containerMain() error { return errNotLinux }

// Launch says how Start starts a sandbox (see the Linux documentation).
type Launch struct {
	Socket string
	Log    *os.File
	Run    func(cmd *exec.Cmd) error
	Placed func(pid int) error
	NetNS  *os.File
	Env    []string
	// Executable: see the Linux Launch.
	Executable string
}

// Start fails: only Linux has sandboxes.
func Start(context.Context, *Config, Launch) (int, error) { return 0, errNotLinux }

// Conn is a connection to a sandbox's init; off Linux there are none.
type Conn struct{}

// Dial fails: only Linux has sandboxes.
func Dial(string) (*Conn, error) { return nil, errNotLinux }

func (c *Conn) Close() error                                         { return nil }
func (c *Conn) Done() <-chan struct{}                                { return nil }
func (c *Conn) Start(context.Context, string) error                  { return ErrGone }
func (c *Conn) Signal(context.Context, string, syscall.Signal) error { return ErrGone }
func (c *Conn) Forget(context.Context, string) error                 { return ErrGone }
func (c *Conn) List(context.Context) ([]ProcessState, error)         { return nil, ErrGone }
func (c *Conn) Wait(context.Context, string) (ExitStatus, error)     { return ExitStatus{}, ErrGone }
func (c *Conn) Create(context.Context, string, *ProcessSpec, Stdio) (Process, error) {
	return Process{}, ErrGone
}

// Available fails: only Linux has sandboxes.
func Available(string) error { return errNotLinux }

// SeccompSupported is false off Linux.
func SeccompSupported() bool { return false }
