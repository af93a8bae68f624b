package podconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

const etcdYAML = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  priorityClassName: system-node-critical
  containers:
  - name: etcd
    image: etcd:3.6
`

const proxyJSON = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "proxy"},
  "spec": {"containers": [{"name": "proxy", "image": "proxy:1"}]}
}`

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

// snapshots is a PodSink that keeps every snapshot it gets.
type snapshots struct {
	mu   sync.Mutex
	list [][]*v1.Pod
}

func (s *snapshots) SetPods(_ context.Context, source string, pods []*v1.Pod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, pods)
	return nil
}

func (s *snapshots) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

func (s *snapshots) lastNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.list[len(s.list)-1] {
		out = append(out, mirror.PodFullName(p))
	}
	return out
}

func TestManifestSourceScan(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "etcd.yaml", etcdYAML)
	writeFile(t, dir, "proxy.json", proxyJSON)
	writeFile(t, dir, ".hidden.yaml", etcdYAML)
	writeFile(t, dir, "notes.txt", "not a manifest")
	writeFile(t, dir, "etcd.yaml~", etcdYAML)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755))
	rec := &events{}
	src, err := podconfig.NewManifestSource(dir, podconfig.ManifestOptions{NodeName: "Node-A", Recorder: rec})
	require.NoError(t, err)
	assert.Equal(t, mirror.FileSource, src.Source())

	pods, changed, err := src.Scan()
	require.NoError(t, err)
	assert.True(t, changed)
	require.Len(t, pods, 2)
	etcd, proxy := pods[0], pods[1]
	assert.Equal(t, "etcd-node-a_kube-system", mirror.PodFullName(etcd))
	assert.Equal(t, "proxy-node-a_default", mirror.PodFullName(proxy))
	for _, p := range pods {
		assert.True(t, mirror.IsStaticPod(p))
		assert.Equal(t, mirror.FileSource, p.Annotations[mirror.ConfigSourceAnnotationKey])
		assert.Equal(t, string(p.UID), p.Annotations[mirror.ConfigHashAnnotationKey])
		assert.Equal(t, "Node-A", p.Spec.NodeName)
		assert.NotEmpty(t, p.UID)
	}
	assert.Empty(t, rec.all())

	// Nothing changed: no new snapshot is needed, and the UIDs are stable.
	again, changed, err := src.Scan()
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, etcd.UID, again[0].UID)

	// Edited: a new UID.
	writeFile(t, dir, "etcd.yaml", etcdYAML+"    args: [\"--v=2\"]\n")
	edited, changed, err := src.Scan()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.NotEqual(t, etcd.UID, edited[0].UID)

	// Removed.
	require.NoError(t, os.Remove(filepath.Join(dir, "proxy.json")))
	left, changed, err := src.Scan()
	require.NoError(t, err)
	assert.True(t, changed)
	require.Len(t, left, 1)
}

func TestManifestSourceBrokenFiles(t *testing.T) {
	cases := map[string]string{
		"empty.yaml":      "",
		"garbage.yaml":    "{{{ not yaml",
		"wrongkind.yaml":  "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n",
		"typo.yaml":       "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\nspec:\n  containerz: []\n",
		"noname.json":     `{"apiVersion": "v1", "kind": "Pod", "metadata": {}}`,
		"underscore.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad_name\n",
	}
	for file, content := range cases {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "etcd.yaml", etcdYAML)
			writeFile(t, dir, file, content)
			rec := &events{}
			src, err := podconfig.NewManifestSource(dir, podconfig.ManifestOptions{NodeName: "node-a", Recorder: rec})
			require.NoError(t, err)
			pods, _, err := src.Scan()
			require.NoError(t, err, "a broken file is not an error of the directory")
			require.Len(t, pods, 1, "the other pods stay")
			evs := rec.all()
			require.Len(t, evs, 1)
			assert.Equal(t, podconfig.ReasonInvalidManifest, evs[0].Reason)
			assert.Equal(t, v1.EventTypeWarning, evs[0].Type)
			assert.Equal(t, "Node/node-a", evs[0].ObjectKey)
			assert.Contains(t, evs[0].Message, filepath.Join(dir, file))

			// Reported once per content, not on every read.
			_, changed, err := src.Scan()
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Len(t, rec.all(), 1)
		})
	}
}

func TestManifestSourceMissingDirectoryIsEmpty(t *testing.T) {
	src, err := podconfig.NewManifestSource(filepath.Join(t.TempDir(), "absent"), podconfig.ManifestOptions{NodeName: "n"})
	require.NoError(t, err)
	pods, changed, err := src.Scan()
	require.NoError(t, err)
	assert.True(t, changed, "the first scan always counts, so the source becomes ready")
	assert.Empty(t, pods)
}

func TestManifestSourceUnreadableDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, dir, "file", "x")
	src, err := podconfig.NewManifestSource(file, podconfig.ManifestOptions{NodeName: "n"})
	require.NoError(t, err)
	_, _, err = src.Scan()
	require.ErrorContains(t, err, "podconfig: listing manifest directory")
}

func TestNewManifestSourceValidates(t *testing.T) {
	for name, tc := range map[string]struct {
		dir  string
		opts podconfig.ManifestOptions
	}{
		"no dir":       {"", podconfig.ManifestOptions{NodeName: "n"}},
		"no node":      {"/x", podconfig.ManifestOptions{}},
		"api source":   {"/x", podconfig.ManifestOptions{NodeName: "n", Source: mirror.ApiserverSource}},
		"bad interval": {"/x", podconfig.ManifestOptions{NodeName: "n", Interval: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := podconfig.NewManifestSource(tc.dir, tc.opts)
			assert.ErrorContains(t, err, "podconfig: ")
		})
	}
	src, err := podconfig.NewManifestSource("/x", podconfig.ManifestOptions{NodeName: "n"})
	require.NoError(t, err)
	assert.ErrorContains(t, src.Run(context.Background(), nil), "PodSink")
}

func TestManifestSourceRunPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "etcd.yaml", etcdYAML)
		clk := testingclock.NewFakeClock(epoch)
		src, err := podconfig.NewManifestSource(dir, podconfig.ManifestOptions{NodeName: "node-a", Clock: clk, Interval: 10 * time.Second})
		require.NoError(t, err)
		sink := &snapshots{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, sink) }()
		synctest.Wait()
		require.Equal(t, 1, sink.count(), "a first snapshot at once")
		assert.Equal(t, []string{"etcd-node-a_kube-system"}, sink.lastNames())

		clk.Step(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, sink.count(), "nothing changed, nothing sent")

		writeFile(t, dir, "proxy.json", proxyJSON)
		clk.Step(9 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, sink.count(), "not before the interval")
		clk.Step(time.Second)
		synctest.Wait()
		require.Equal(t, 2, sink.count())
		assert.Equal(t, []string{"etcd-node-a_kube-system", "proxy-node-a_default"}, sink.lastNames())

		cancel()
		require.NoError(t, <-done)
	})
}
