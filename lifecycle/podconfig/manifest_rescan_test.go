package podconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// decodes counts the calls of decodeManifest, by content.
type decodes struct {
	mu    sync.Mutex
	calls map[string]int
}

func (d *decodes) decode(data []byte) (*v1.Pod, int, error) {
	d.mu.Lock()
	d.calls[string(data)]++
	d.mu.Unlock()
	return decodeManifest(data)
}

func (d *decodes) count(data string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[data]
}

// A scan reads every file but decodes only those whose bytes changed: an
// unchanged manifest, good or broken, is not decoded again, however large.
func TestUnchangedManifestsAreNotDecodedAgain(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	good, broken := fmt.Sprintf(podYAML, "good"), "apiVersion: v1\nkind: Pod\nspec: {bogus: 1}\n"
	write("good.yaml", good)
	write("broken.yaml", broken)
	rec := &recorded{}
	src, err := NewManifestSource(dir, ManifestOptions{NodeName: "node-a", Recorder: rec})
	require.NoError(t, err)
	d := &decodes{calls: map[string]int{}}
	src.decode = d.decode

	for range 3 {
		assert.Equal(t, []string{"good-node-a"}, podNames(t, src))
	}
	assert.Equal(t, 1, d.count(good), "the good manifest was decoded once in three scans")
	assert.Equal(t, 1, d.count(broken), "the broken one too")
	assert.Len(t, rec.all(), 1, "the broken one was reported once")

	changed := fmt.Sprintf(podYAML, "changed")
	write("good.yaml", changed)
	assert.Equal(t, []string{"changed-node-a"}, podNames(t, src))
	assert.Equal(t, 1, d.count(changed), "a changed file is decoded")
	write("good.yaml", good)
	assert.Equal(t, []string{"good-node-a"}, podNames(t, src))
	assert.Equal(t, 2, d.count(good), "and so is one changed back")

	// A file that read nothing (empty) after one that could not be read is
	// decoded, not taken for the failed read's empty content.
	write("empty.yaml", "")
	src.reads.read = func(path string, max int64) ([]byte, error) {
		if filepath.Base(path) == "empty.yaml" {
			return nil, os.ErrPermission
		}
		return readManifestFile(path, max)
	}
	podNames(t, src)
	src.reads.read = readManifestFile
	podNames(t, src)
	assert.Equal(t, 1, d.count(""), "the empty file was decoded once it could be read")
	assert.Equal(t, 2, d.count(good), "the others were not decoded again")
}
