package processruntime

import (
	"os"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// This file is what a container's process is given as its standard
// streams: pipes whose other ends its log shim holds, and, with stdin:
// true, a stdin pipe the shim holds too; with tty: true, a terminal
// instead, whose master the shim holds (see "Stdin and terminals" in the
// package doc).

// containerIO is the process's ends of its pipes. With a terminal, all
// are nil: the process gets the terminal's slave.
type containerIO struct {
	stdout, stderr *os.File
	// stdin is nil without stdin: true (the process gets /dev/null).
	stdin *os.File
}

// close closes the process's ends, once the process holds them.
func (c containerIO) close() {
	for _, f := range []*os.File{c.stdout, c.stderr, c.stdin} {
		if f != nil {
			f.Close()
		}
	}
}

// shimMode is what the log shim of a container holds beside its output.
// stdinOnce means nothing without stdin, as on a kubelet.
func shimMode(spec *v1.Container) logshim.Mode {
	return logshim.Mode{TTY: spec.TTY, Stdin: spec.Stdin, StdinOnce: spec.Stdin && spec.StdinOnce}
}
