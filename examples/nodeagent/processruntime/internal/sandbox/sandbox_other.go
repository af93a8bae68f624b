//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// errNotLinux is every stage's and call's error off Linux.
var errNotLinux = errors.New("sandbox: only Linux has the namespaces a sandbox needs")

func spawnerMain() error   { return errNotLinux }
func initMain() error      { return errNotLinux }
func containerMain() error { return errNotLinux }

// Launch says how Spawner.Start starts a sandbox (see the Linux
// documentation).
type Launch struct {
	Socket                string
	Log                   *os.File
	NetNS                 *os.File
	Env                   []string
	Cgroup                string
	JoinTasks, LeaveTasks []string
}

// SpawnerOptions configure a Spawner (see the Linux documentation).
type SpawnerOptions struct {
	Executable string
}

// Spawner starts sandboxes; off Linux there are none.
type Spawner struct{}

// NewSpawner returns a Spawner whose Starts fail.
func NewSpawner(SpawnerOptions) (*Spawner, error) { return &Spawner{}, nil }

// Start fails: only Linux has sandboxes.
func (*Spawner) Start(context.Context, *Config, Launch) (int, error) { return 0, errNotLinux }

// Close does nothing.
func (*Spawner) Close() error { return nil }

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
