package kube_test

import (
	"os"
	"testing"
)

// TestMain removes the commands the tests built once the tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	removeBinaries()
	os.Exit(code)
}
