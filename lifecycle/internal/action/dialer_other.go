//go:build !unix

package action

import "net"

// dialer returns the dialer of every action's connection: a plain one
// here (the one-second SO_LINGER is set on unix systems only).
func dialer() *net.Dialer { return &net.Dialer{} }
