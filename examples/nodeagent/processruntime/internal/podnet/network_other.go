//go:build !linux

package podnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"

	"k8s.io/apimachinery/pkg/types"
)

// The pod network is made of Linux network namespaces, bridges and veth
// pairs; elsewhere New fails with a clear error and these are never
// reached.

var errUnsupportedOS = errors.New("podnet: only Linux is supported")

func checkPlatform() error                  { return errUnsupportedOS }
func lockStateDir(string) (*os.File, error) { return nil, errUnsupportedOS }

func (n *Network) attachLocked(context.Context, types.UID, string) (netip.Addr, error) {
	return netip.Addr{}, errUnsupportedOS
}
func (n *Network) detachLocked(types.UID) error { return errUnsupportedOS }
func (n *Network) sweepStraysLocked() error     { return errUnsupportedOS }
func (n *Network) deleteBridgeLocked() error    { return errUnsupportedOS }

// DialLoopback fails: only Linux is supported.
func DialLoopback(context.Context, string, uint16) (net.Conn, error) { return nil, errUnsupportedOS }
