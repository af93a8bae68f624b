package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
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

// TestManifestDirectoryEndToEnd runs a whole agent on a manifest directory:
// pods start, an edit replaces the pod, a broken manifest is reported while
// the others run on, and a removed file's pod is killed.
func TestManifestDirectoryEndToEnd(t *testing.T) {
	bubble(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "etcd.yaml", etcdYAML)
		writeFile(t, dir, "proxy.json", proxyJSON)
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) { o.Sources = []string{mirror.FileSource} })
		src, err := podconfig.NewManifestSource(dir, podconfig.ManifestOptions{NodeName: "node-a", Clock: e.clock, Interval: housekeepingInterval, Recorder: e.events})
		require.NoError(t, err)
		e.start()
		ctx, cancel := context.WithCancel(e.ctx)
		srcDone := make(chan error, 1)
		go func() { srcDone <- src.Run(ctx, e.cfg) }()
		synctest.Wait()
		defer func() {
			cancel()
			require.NoError(t, <-srcDone)
		}()

		byName := func(name string) *v1.Pod {
			p, ok := e.store.GetPodByFullName(name)
			require.True(t, ok, "pod %s is desired", name)
			return p
		}
		etcd, proxy := byName("etcd-node-a_kube-system"), byName("proxy-node-a_default")
		assert.Equal(t, "sync:create", e.trace(etcd.UID))
		assert.Equal(t, "sync:create", e.trace(proxy.UID))

		// Each step moves the clock once: the source reads the directory
		// and housekeeping runs (it keeps the mirror pods in step).
		writeFile(t, dir, "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n")
		writeFile(t, dir, "etcd.yaml", etcdYAML+"    args: [\"--v=2\"]\n")
		e.housekeep()
		e.housekeep()
		newEtcd := byName("etcd-node-a_kube-system")
		require.NotEqual(t, etcd.UID, newEtcd.UID)
		assert.Equal(t, "sync:create kill(30) terminated", e.trace(etcd.UID))
		assert.Equal(t, "sync:create", e.trace(newEtcd.UID))
		assert.Equal(t, "sync:create", e.trace(proxy.UID), "a broken manifest leaves the other pods alone")
		assert.Contains(t, e.events.reasons(), podconfig.ReasonInvalidManifest+" Node/node-a")
		// The API server still holds the old version's mirror; once the
		// API source shows it, housekeeping replaces it.
		e.feedMirrors()
		e.housekeep()
		m, ok := e.mirrors.MirrorPod("etcd-node-a_kube-system")
		require.True(t, ok)
		assert.True(t, mirror.IsMirrorPodOf(m, newEtcd), "the mirror follows the new version")
		e.feedMirrors()
		calls := e.syncer.CallsFor(newEtcd.UID)
		last := calls[len(calls)-1]
		require.NotNil(t, last.MirrorPod)
		assert.True(t, mirror.IsMirrorPodOf(last.MirrorPod, newEtcd), "the new mirror reached the static pod's worker")

		require.NoError(t, os.Remove(filepath.Join(dir, "proxy.json")))
		e.housekeep()
		assert.True(t, strings.HasSuffix(e.trace(proxy.UID), " kill(30) terminated"), e.trace(proxy.UID))
		e.housekeep()
		e.feedMirrors()
		e.housekeep()
		assert.Equal(t, []string{"etcd-node-a_kube-system"}, e.mirrors.MirrorPodNames(), "the orphaned mirror is gone")
		assert.Equal(t, podworker.StageAbsent, e.stage(proxy.UID))
		assert.Equal(t, []types.UID{newEtcd.UID}, uids(e.h.GetActivePods()))
	})
}
