package main

import "syscall"

// peerUID returns the user ID of the process at the other end of the unix
// socket fd (SO_PEERCRED: its credentials when it connected).
func peerUID(fd int) (int, error) {
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return 0, err
	}
	return int(cred.Uid), nil
}
