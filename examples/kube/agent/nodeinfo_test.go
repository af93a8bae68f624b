package agent

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOSImage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"double quotes", "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n", "Debian GNU/Linux 12 (bookworm)"},
		{"single quotes", "PRETTY_NAME='Alpine Linux v3.20'\n", "Alpine Linux v3.20"},
		{"no quotes", "ID=x\nPRETTY_NAME=Plain\n", "Plain"},
		{"no pretty name", "NAME=x\n", ""},
		{"a line over the cap", "PRETTY_NAME=" + strings.Repeat("x", 2*maxInfoFile) + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "os-release")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			assert.Equal(t, tc.want, osImage(path))
		})
	}
	assert.Empty(t, osImage(filepath.Join(dir, "missing")))
}

func TestSystemInfo(t *testing.T) {
	info := systemInfo()
	assert.Equal(t, runtime.GOOS, info.OperatingSystem)
	assert.Equal(t, runtime.GOARCH, info.Architecture)
	assert.Equal(t, ContainerRuntimeVersion, info.ContainerRuntimeVersion)
	if runtime.GOOS == "linux" {
		assert.NotEmpty(t, info.KernelVersion, "the kernel release from /proc")
		assert.NotEmpty(t, info.BootID, "the boot ID from /proc")
	}
}
