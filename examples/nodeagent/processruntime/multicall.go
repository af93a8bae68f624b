package processruntime

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path"
	"sync"
	"time"
)

// A multi-call program's applets, as ImageConfig.Multicall uses them.

// Bounds of reading a multi-call program's applet list (`prog --list`):
// how long it may take, and how much of its output is read.
const (
	multicallListTimeout = 5 * time.Second
	multicallListMax     = 64 << 10
)

// multicalls caches, per program name, the node's program and its
// applets; found once, for the runtime's life.
type multicalls struct {
	mu    sync.Mutex
	found map[string]*multicallProgram
}

// multicallProgram is a multi-call program of the node: its path, and its
// applets; path is "" when the node has none of that name.
type multicallProgram struct {
	path    string
	applets map[string]bool
}

// lookup returns the node's multi-call program name and its applets,
// listing them the first time.
func (m *multicalls) lookup(name string) *multicallProgram {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.found[name]; ok {
		return p
	}
	if m.found == nil {
		m.found = map[string]*multicallProgram{}
	}
	p := &multicallProgram{}
	m.found[name] = p
	exe, err := exec.LookPath(name)
	if err != nil {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), multicallListTimeout)
	defer cancel()
	out := &cappedOutput{max: multicallListMax}
	cmd := exec.CommandContext(ctx, exe, "--list")
	cmd.Stdout = out
	if cmd.Run() != nil {
		return p
	}
	p.applets = map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(out.bytes()))
	for s.Scan() {
		if a := s.Text(); a != "" {
			p.applets[a] = true
		}
	}
	p.path = exe
	return p
}

// argv returns argv as the applet of program name it names, and true,
// when the node has that program and argv[0]'s base name is one of its
// applets; else argv unchanged, and false.
func (m *multicalls) argv(name string, argv []string) ([]string, bool) {
	if name == "" || len(argv) == 0 {
		return argv, false
	}
	p := m.lookup(name)
	applet := path.Base(argv[0])
	if p.path == "" || !p.applets[applet] {
		return argv, false
	}
	return append([]string{p.path, applet}, argv[1:]...), true
}
