//go:build !linux

package main

import "errors"

// peerUID fails: the peer's credentials are read here the Linux way only
// (SO_PEERCRED), so no one may use the shutdown socket elsewhere.
func peerUID(int) (int, error) {
	return 0, errors.New("the shutdown socket's peer credentials need Linux")
}
