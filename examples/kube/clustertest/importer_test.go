package clustertest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportedByAnotherModule: a module of its own (testdata/importer,
// copied to a temporary directory) that requires this one, with no
// replace directive but the two that point at this unpublished checkout,
// gets tidy, never requires or links k8s.io/kubernetes, and starts a
// 1-node cluster that runs a pod; the control plane stays quiet (none of
// its log lines in the test's output).
func TestImportedByAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs another module's test")
	}
	kube, err := filepath.Abs("..")
	require.NoError(t, err)
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	dir := t.TempDir()
	mod, err := os.ReadFile("testdata/importer/go.mod.in")
	require.NoError(t, err)
	mod = []byte(strings.NewReplacer("KUBE_MODULE_DIR", kube, "PODKIT_MODULE_DIR", root).Replace(string(mod)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), mod, 0o644))
	src, err := os.ReadFile("testdata/importer/importer_test.go")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "importer_test.go"), src, 0o644))
	// The checksums the module needs are this module's: seeding go.sum
	// with them spares a checksum database this machine may not reach.
	sums, err := os.ReadFile(filepath.Join(kube, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644))

	goIn := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return string(out)
	}
	goIn("mod", "tidy")
	tidy, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.NotRegexp(t, `(?m)^\s*k8s\.io/kubernetes `, string(tidy), "the module does not require Kubernetes:\n%s", tidy)
	assert.Len(t, regexp.MustCompile(`(?m)^replace `).FindAllString(string(tidy), -1), 2, "no replace but podkit's own:\n%s", tidy)
	deps := goIn("list", "-deps", "-test", ".")
	assert.NotContains(t, deps, "k8s.io/kubernetes/", "the test binary links nothing of Kubernetes")

	args := []string{"test", "-count=1", "-v"}
	if raceEnabled {
		args = append(args, "-race") // the packages this test's build compiled are reused
	}
	out := goIn(append(args, ".")...)
	assert.Contains(t, out, "--- PASS: TestOneNodeCluster")
	assert.Contains(t, out, "pod hello ran on node-0 and succeeded")
	// klog lines of the control plane: the API server's, the controller
	// manager's, etcd's client.
	noisy := regexp.MustCompile(`(?m)^[IWE]\d{4} .*(genericapiserver|controllermanager|etcd)`)
	assert.Empty(t, noisy.FindAllString(out, 5), "the control plane is quiet by default:\n%s", out)
}
