package processruntime_test

import (
	"os/exec"
	"testing"
)

// needBusybox skips a test whose pods run busybox applets (httpd, nc)
// where the machine has no busybox, and returns its path. Without it such
// a pod's command ends with 127, which a test would otherwise report as a
// failure of the runtime, or, worse, take for the outcome it expects (a
// port "refused").
func needBusybox(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox on this machine (the pods of this test run its applets; CI installs busybox-static)")
	}
	return bb
}
