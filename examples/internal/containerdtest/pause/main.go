// Command pause is the sandbox ("pause") process of the pod sandboxes the
// integration tests run: it holds the sandbox's namespaces, reaps the
// children it inherits, and exits on SIGINT or SIGTERM. The tests build it
// as a static binary (CGO_ENABLED=0) into a one-layer image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", sig)
			os.Exit(0)
		}
		// Reap every child that has exited (orphans re-parented to us).
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
