package volume_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle/volume"
)

// TestReadersNeverSeeAHalfWrittenSet updates a config map volume over and
// over while readers read it: through ..data, a reader always finds the
// files of one version together, and a visible file is always one
// version's whole content.
func TestReadersNeverSeeAHalfWrittenSet(t *testing.T) {
	e := newEnv(t, volume.Options{})
	version := func(n int) *v1.ConfigMap {
		body := strings.Repeat(fmt.Sprintf("v%d;", n), 2000)
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Data: map[string]string{"a": body, "b": body, "c/d": body}}
	}
	e.objects.SetConfigMap(version(0))
	p := pod("p1", configMapVolume("v", "app", v1.KeyToPath{Key: "a", Path: "a"}, v1.KeyToPath{Key: "b", Path: "b"}, v1.KeyToPath{Key: "c/d", Path: "c/d"}))
	setUp(t, e, p)
	dir, _ := e.m.HostPath("p1", "v")

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	check := func(data []byte) error {
		s := string(data)
		if s == "" {
			return errors.New("an empty file")
		}
		first, _, _ := strings.Cut(s, ";")
		if s != strings.Repeat(first+";", 2000) {
			return fmt.Errorf("a file mixing versions or cut short (%d bytes)", len(s))
		}
		return nil
	}
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				// One version's set, through ..data.
				ts, err := os.Readlink(filepath.Join(dir, "..data"))
				if err != nil {
					t.Errorf("readlink ..data: %v", err)
					return
				}
				var got []string
				for _, f := range []string{"a", "b", "c/d"} {
					data, err := os.ReadFile(filepath.Join(dir, ts, f))
					if errors.Is(err, fs.ErrNotExist) {
						got = nil // the version was replaced meanwhile: retry
						break
					}
					if err != nil {
						t.Errorf("read: %v", err)
						return
					}
					if err := check(data); err != nil {
						t.Errorf("%s: %v", f, err)
						return
					}
					got = append(got, string(data[:8]))
				}
				if got != nil && (got[0] != got[1] || got[1] != got[2]) {
					t.Errorf("one ..data holds versions %v", got)
					return
				}
				// A visible file: one version, whole.
				data, err := os.ReadFile(filepath.Join(dir, "c", "d"))
				if err != nil {
					t.Errorf("read c/d: %v", err)
					return
				}
				if err := check(data); err != nil {
					t.Errorf("c/d: %v", err)
					return
				}
				reads.Add(1)
			}
		})
	}
	for n := 1; n <= 200; n++ {
		e.objects.SetConfigMap(version(n))
		require.NoError(t, e.m.SetUp(context.Background(), p))
	}
	stop.Store(true)
	wg.Wait()
	require.Positive(t, reads.Load())
	require.Equal(t, []string{"a=" + version(200).Data["a"], "b=" + version(200).Data["b"], "c/d=" + version(200).Data["c/d"]}, tree(t, dir))
}

// TestAnInterruptedWriteIsCleanedUp leaves what a crash between writing a
// new version and publishing it would, and checks the next write removes
// it and publishes the source's content.
func TestAnInterruptedWriteIsCleanedUp(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.setObjects()
	p := pod("p1", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "mode"}))
	setUp(t, e, p)
	dir, _ := e.m.HostPath("p1", "v")
	first := readLink(t, dir)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "..2020_01_01_00_00_00.123"), 0o755))
	require.NoError(t, os.Symlink("..2020_01_01_00_00_00.123", filepath.Join(dir, "..data_tmp")))
	e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string]string{"mode": "slow"}})
	setUp(t, e, p)
	require.ElementsMatch(t, []string{"..data", readLink(t, dir), first, "mode"}, entries(t, dir), "what the interrupted write left is gone")
	require.Equal(t, []string{"mode=slow"}, tree(t, dir))

	// A ..data that is not the writer's is refused, not followed.
	require.NoError(t, os.Remove(filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "..data")))
	err := e.m.SetUp(context.Background(), p)
	require.ErrorContains(t, err, `the volume's ..data link points to "/etc", not to a directory of its own`)
}
