// Package pty opens pseudo-terminals for the process runtime: the
// terminal of a container with tty: true (its master held by the
// container's log shim) and of an exec with a TTY (its master held by the
// agent for the session). The sandbox's init opens them in the pod's own
// devpts instance (/dev/ptmx there), so the process sees its terminal
// under the pod's /dev/pts; a pod run without a sandbox gets one of the
// host's.
//
// # Usage
//
//  1. Open with the multiplexer's path: the master is the caller's; the
//     slave becomes the process's stdin, stdout and stderr, and its
//     controlling terminal (the process makes a session of its own and
//     calls TIOCSCTTY, or exec.Cmd does with Setsid and Setctty).
//  2. Close the slave once the process holds it: reads on the master then
//     end (EIO, which ReadMaster reports as io.EOF) when the process and
//     everything it started have closed their copies.
//  3. SetSize on the master as the client's terminal is resized.
//
// # Concurrency
//
// The functions may be called from any goroutine. A master is an
// *os.File in non-blocking mode: reads and writes wait in the Go runtime's
// poller, and Close interrupts them.
//
// Linux only (TIOCGPTPEER, Linux 4.13); elsewhere Open returns an error.
package pty
