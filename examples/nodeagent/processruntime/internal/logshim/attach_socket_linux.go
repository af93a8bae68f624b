//go:build linux

package logshim

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/unixsock"
)

// ListenAttach creates the listening attach socket of instance in dir,
// replacing a stale one, for the shim to be started with (its fdAttach).
// The socket is the agent's alone (0600 in a directory only it reaches):
// whoever connects types into the container.
func ListenAttach(dir string, instance int) (*os.File, error) {
	f, err := unixsock.Listen(filepath.Join(dir, AttachSocketName(instance)), 16)
	if err != nil {
		return nil, fmt.Errorf("the attach socket: %w", err)
	}
	return f, nil
}

// dialAttach connects to the attach socket of instance in dir.
func dialAttach(dir string, instance int) (*net.UnixConn, error) {
	return unixsock.Dial(filepath.Join(dir, AttachSocketName(instance)))
}
