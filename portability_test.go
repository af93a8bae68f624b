package podkit_test

import (
	"os"
	"os/exec"
	"testing"
)

// The root module, examples included, builds and vets on macOS too: the
// README's first command must fail there with the process runtime's
// clear error ("only Linux is supported"), not a compile error, and a
// library user on a Mac must be able to build and vet a program that
// imports any package. Nothing Linux-only may leak into a portable file
// (syscall.MNT_DETACH, SO_PEERCRED, Pdeathsig, ...): each such call has a
// _linux.go file and a !linux one beside it.
func TestVetsOnMacOS(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command(goCmd, "vet", "./...")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=darwin go vet ./...: %v\n%s", err, out)
	}
}
