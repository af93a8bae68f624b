package podconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/lifecycle/podconfig"
)

// scanOnly scans dir once, with the given file size cap (0: the default),
// and returns the full names of its pods and the events recorded.
func scanOnly(t *testing.T, dir string, maxSize int64) ([]string, []event) {
	t.Helper()
	rec := &events{}
	src, err := podconfig.NewManifestSource(dir, podconfig.ManifestOptions{NodeName: "node-a", Recorder: rec, MaxFileSize: maxSize})
	require.NoError(t, err)
	pods, _, err := src.Scan()
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Name+"_"+p.Namespace)
	}
	return names, rec.all()
}

// A manifest larger than the cap is refused from its size, without being
// read: a 6 GB sparse file costs nothing.
func TestManifestSourceRefusesAHugeFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "etcd.yaml", etcdYAML)
	f, err := os.Create(filepath.Join(dir, "huge.yaml"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(6<<30))
	require.NoError(t, f.Close())

	names, evs := scanOnly(t, dir, 0)
	assert.Equal(t, []string{"etcd-node-a_kube-system"}, names)
	require.Len(t, evs, 1)
	assert.Equal(t, podconfig.ReasonInvalidManifest, evs[0].Reason)
	assert.Contains(t, evs[0].Message, "huge.yaml")
	assert.Contains(t, evs[0].Message, "it is 6442450944 bytes, more than the 1572864-byte cap")
}

// A valid manifest above the cap (the API server could not store its
// mirror pod) is refused rather than decoded.
func TestManifestSourceRefusesAnOversizedValidManifest(t *testing.T) {
	dir := t.TempDir()
	big := etcdYAML + "    args: [\"" + strings.Repeat("x", 2<<20) + "\"]\n"
	writeFile(t, dir, "big.yaml", big)
	names, evs := scanOnly(t, dir, 0)
	assert.Empty(t, names)
	require.Len(t, evs, 1)
	assert.Equal(t, podconfig.ReasonInvalidManifest, evs[0].Reason)
	assert.Contains(t, evs[0].Message, "more than the 1572864-byte cap")

	// Under a cap it fits, it is a pod.
	names, evs = scanOnly(t, dir, 3<<20)
	assert.Equal(t, []string{"etcd-node-a_kube-system"}, names)
	assert.Empty(t, evs)
}

// A named pipe behind a manifest's name (a symlink, or the pipe itself)
// would block a read forever: it is reported and never opened.
func TestManifestSourceDoesNotReadANamedPipe(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "etcd.yaml", etcdYAML)
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	require.NoError(t, os.Symlink(fifo, filepath.Join(dir, "link.yaml")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644))
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(dir, "dir.yaml")))

	names, evs := scanOnly(t, dir, 0)
	assert.Equal(t, []string{"etcd-node-a_kube-system"}, names)
	require.Len(t, evs, 2, "a symlink to a directory is skipped like a directory: %+v", evs)
	for _, ev := range evs {
		assert.Equal(t, podconfig.ReasonInvalidManifest, ev.Reason)
		assert.Contains(t, ev.Message, "not a regular file (a named pipe)")
	}
}

// A symlink to /proc/kmsg, a "regular" file that blocks until the kernel
// logs something and consumes what it returns, is refused once opened,
// without a read.
func TestManifestSourceDoesNotReadProcFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "etcd.yaml", etcdYAML)
	require.NoError(t, os.Symlink("/proc/self/status", filepath.Join(dir, "status.yaml")))
	if f, err := os.Open("/proc/kmsg"); err == nil {
		f.Close()
		require.NoError(t, os.Symlink("/proc/kmsg", filepath.Join(dir, "kmsg.yaml")))
	} else {
		t.Logf("/proc/kmsg cannot be opened here (%v): only /proc/self/status is tried", err)
	}
	names, evs := scanOnly(t, dir, 0)
	assert.Equal(t, []string{"etcd-node-a_kube-system"}, names)
	require.NotEmpty(t, evs)
	for _, ev := range evs {
		assert.Contains(t, ev.Message, "it is a file of /proc, not a manifest")
	}
}

// A file of several YAML documents gives the pod of its first, with a
// warning, instead of dropping the others silently.
func TestManifestSourceWarnsOfSeveralDocuments(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "both.yaml", "# two pods\n---\n"+etcdYAML+"---\n# a comment only\n---\n"+strings.Replace(etcdYAML, "name: etcd\n", "name: etcd-2\n", 1))
	writeFile(t, dir, "one.yaml", "---\n"+strings.Replace(etcdYAML, "name: etcd\n", "name: single\n", 1)+"---\n")
	names, evs := scanOnly(t, dir, 0)
	assert.Equal(t, []string{"etcd-node-a_kube-system", "single-node-a_kube-system"}, names)
	require.Len(t, evs, 1)
	assert.Equal(t, podconfig.ReasonMultipleDocuments, evs[0].Reason)
	assert.Contains(t, evs[0].Message, "both.yaml holds 2 YAML documents; only the first (pod etcd-node-a_kube-system) is used")
}

func TestNewManifestSourceRefusesNegativeBounds(t *testing.T) {
	_, err := podconfig.NewManifestSource("/x", podconfig.ManifestOptions{NodeName: "n", MaxFileSize: -1})
	assert.ErrorContains(t, err, "podconfig: ManifestOptions.MaxFileSize is -1")
	_, err = podconfig.NewManifestSource("/x", podconfig.ManifestOptions{NodeName: "n", ReadTimeout: -1})
	assert.ErrorContains(t, err, "podconfig: ManifestOptions.ReadTimeout is -1ns")
}
