package volume_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/lifecycle/volume"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// running starts e's manager's Run on a goroutine of the bubble and
// returns a function that stops it and checks it returned nil.
func running(t *testing.T, e *env) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	synctest.Wait()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

func TestRunRefreshesVolumesFromTheirSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		e := newEnv(t, volume.Options{Clock: clk, RefreshInterval: time.Minute})
		e.setObjects()
		setUp(t, e, pod("p1", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "mode"})))
		dir, _ := e.m.HostPath("p1", "v")
		stop := running(t, e)
		defer stop()

		e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string]string{"mode": "slow"}})
		clk.Step(59 * time.Second)
		synctest.Wait()
		require.Equal(t, "fast", readFile(t, filepath.Join(dir, "mode")), "not before the refresh interval")
		clk.Step(time.Second)
		synctest.Wait()
		require.Equal(t, "slow", readFile(t, filepath.Join(dir, "mode")), "updated at the refresh")

		// A failure is reported once, not at every refresh; the last content stays.
		e.objects.Delete("configmap", ns, "app")
		for range 3 {
			clk.Step(time.Minute)
			synctest.Wait()
		}
		require.Equal(t, []string{`Warning FailedMount MountVolume.SetUp failed for volume "v" : configmap "app" not found`}, e.events.take())
		require.Equal(t, "slow", readFile(t, filepath.Join(dir, "mode")))
		_, err := e.m.HostPath("p1", "v")
		require.NoError(t, err, "a volume once ready stays ready")
	})
}

func TestRunStopsRefreshingOnceContainersStopAndTearsDownOnlyWhenContentMayGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		e := newEnv(t, volume.Options{Clock: clk})
		e.setObjects()
		p := pod("p1", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "mode"}),
			secretVolume("s", "db"), emptyDir("mem", v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}))
		setUp(t, e, p)
		dir, _ := e.m.HostPath("p1", "v")
		mem, _ := e.m.HostPath("p1", "mem")
		stop := running(t, e)
		defer stop()

		e.window.stop("p1") // terminated, not deleted: a completed pod still desired
		e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string]string{"mode": "slow"}})
		clk.Step(time.Minute)
		synctest.Wait()
		require.Equal(t, "fast", readFile(t, filepath.Join(dir, "mode")), "no refresh once no container can read it")
		removed, err := e.m.TearDown("p1")
		require.NoError(t, err)
		require.False(t, removed, "the window says its content stays")
		_, err = os.Stat(dir)
		require.NoError(t, err, "kept")

		e.window.remove("p1") // deleted and terminated
		clk.Step(time.Minute)
		synctest.Wait()
		_, err = os.Stat(filepath.Join(e.root, "p1"))
		require.True(t, errors.Is(err, os.ErrNotExist), "torn down: %v", err)
		_, mounted := e.tmpfs.size(mem)
		require.False(t, mounted, "the tmpfs was unmounted first")
		_, err = e.m.HostPath("p1", "v")
		require.ErrorIs(t, err, volume.ErrNotSetUp)
		require.ErrorIs(t, e.m.SetUp(context.Background(), p), volume.ErrContentRemovable)
	})
}

func TestTearDownAtOnceWhenTheWindowSays(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.setObjects()
	setUp(t, e, pod("p1", secretVolume("s", "db"), emptyDir("d", v1.EmptyDirVolumeSource{})))
	e.window.remove("p1")
	removed, err := e.m.TearDown("p1")
	require.NoError(t, err)
	require.True(t, removed)
	require.Empty(t, e.tmpfs.mounted)
	_, err = os.Stat(filepath.Join(e.root, "p1"))
	require.True(t, errors.Is(err, os.ErrNotExist))
	removed, err = e.m.TearDown("p1")
	require.NoError(t, err)
	require.True(t, removed, "again: nothing left")
	_, err = e.m.TearDown("../etc")
	require.EqualError(t, err, `volume: invalid pod UID "../etc"`)
}

func TestRunRemovesOrphansOfAnEarlierRunOnlyWhenTheWindowSays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		e := newEnv(t, volume.Options{Clock: clk})
		for _, uid := range []string{"gone", "still-running"} {
			require.NoError(t, os.MkdirAll(filepath.Join(e.root, uid, "scratch"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(e.root, uid, "scratch", "f"), []byte("x"), 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(e.root, "stray-file"), nil, 0o644))
		e.tmpfs.mounted[filepath.Join(e.root, "gone", "scratch")] = 0
		e.window.remove("gone")
		stop := running(t, e)
		defer stop()
		_, err := os.Stat(filepath.Join(e.root, "gone"))
		require.True(t, errors.Is(err, os.ErrNotExist), "removed at Run's start")
		require.Empty(t, e.tmpfs.mounted, "its tmpfs unmounted")
		_, err = os.Stat(filepath.Join(e.root, "still-running", "scratch", "f"))
		require.NoError(t, err, "a pod the window does not release is kept")
		_, err = os.Stat(filepath.Join(e.root, "stray-file"))
		require.NoError(t, err, "not a pod's directory")
	})
}

func TestRunReportsEmptyDirsOverTheirSizeLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		var mu sync.Mutex
		var evicted []string
		e := newEnv(t, volume.Options{Clock: clk, Evict: func(uid types.UID, msg string) {
			mu.Lock()
			defer mu.Unlock()
			evicted = append(evicted, string(uid)+": "+msg)
		}})
		limit := resource.MustParse("64Ki")
		setUp(t, e, pod("p1", emptyDir("cache", v1.EmptyDirVolumeSource{SizeLimit: &limit}),
			emptyDir("mem", v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit})))
		dir, _ := e.m.HostPath("p1", "cache")
		stop := running(t, e)
		defer stop()

		require.NoError(t, os.WriteFile(filepath.Join(dir, "small"), make([]byte, 1024), 0o644))
		clk.Step(time.Minute)
		synctest.Wait()
		require.Empty(t, evicted, "under its limit")

		require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 128<<10), 0o644))
		for range 2 {
			clk.Step(time.Minute)
			synctest.Wait()
		}
		msg := `Usage of EmptyDir volume "cache" exceeds the limit "64Ki".`
		require.Equal(t, []string{"p1: " + msg}, evicted, "once while it stays over")
		require.Equal(t, []string{"Warning SizeLimitExceeded " + msg}, e.events.take())

		require.NoError(t, os.Remove(filepath.Join(dir, "big")))
		clk.Step(time.Minute)
		synctest.Wait()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 128<<10), 0o644))
		clk.Step(time.Minute)
		synctest.Wait()
		require.Len(t, evicted, 2, "reported again after it went back under")
	})
}

func TestRunTreatsAnUncountableEmptyDirAsOverItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		e := newEnv(t, volume.Options{Clock: clk, MaxUsageEntries: 10})
		limit := resource.MustParse("1Gi")
		setUp(t, e, pod("p1", emptyDir("cache", v1.EmptyDirVolumeSource{SizeLimit: &limit})))
		dir, _ := e.m.HostPath("p1", "cache")
		for i := range 20 {
			require.NoError(t, os.WriteFile(filepath.Join(dir, string(rune('a'+i))), nil, 0o644))
		}
		stop := running(t, e)
		defer stop()
		require.Equal(t, []string{`Warning SizeLimitExceeded EmptyDir volume "cache" holds more than 10 files and directories: treated as over its limit "1Gi".`}, e.events.take())
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, volume.Options{Clock: testingclock.NewFakeClock(epoch)})
		stop := running(t, e)
		defer stop()
		require.EqualError(t, e.m.Run(context.Background()), "volume: Run called twice")
	})
}

func TestSetUpAndRunConcurrently(t *testing.T) {
	// Race-detector food: SetUp of several pods, their readers and Run's
	// refreshes and teardowns at once.
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		e := newEnv(t, volume.Options{Clock: clk, RefreshInterval: time.Second})
		e.setObjects()
		stop := running(t, e)
		defer stop()
		var wg sync.WaitGroup
		for i := range 4 {
			uid := types.UID("p" + string(rune('0'+i)))
			wg.Go(func() {
				p := pod(uid, configMapVolume("v", "app"), emptyDir("d", v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))}))
				for range 5 {
					if err := e.m.SetUp(context.Background(), p); err != nil {
						t.Errorf("SetUp: %v", err)
					}
					if _, err := e.m.SubPath(uid, "v", "mode"); err != nil {
						t.Errorf("SubPath: %v", err)
					}
				}
				e.window.remove(uid)
			})
		}
		for range 5 {
			clk.Step(time.Second)
		}
		wg.Wait()
		clk.Step(time.Second)
		synctest.Wait()
		entries, err := os.ReadDir(e.root)
		require.NoError(t, err)
		require.Empty(t, entries, "every pod torn down")
	})
}

func TestRunAsksForASyncWhenAFailedPodsVolumesBecomeReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		var mu sync.Mutex
		var synced []types.UID
		e := newEnv(t, volume.Options{Clock: clk, RequestSync: func(uid types.UID) {
			mu.Lock()
			defer mu.Unlock()
			synced = append(synced, uid)
			panic("a RequestSync bug is survived")
		}})
		p := pod("p1", configMapVolume("v", "app"), emptyDir("d", v1.EmptyDirVolumeSource{}))
		require.Error(t, e.m.SetUp(context.Background(), p), "its config map does not exist yet")
		stop := running(t, e)
		defer stop()
		clk.Step(time.Minute)
		synctest.Wait()
		require.Empty(t, synced, "still missing")

		e.setObjects()
		clk.Step(time.Minute)
		synctest.Wait()
		require.Equal(t, []types.UID{"p1"}, synced, "ready now: the containers may start")
		_, err := e.m.HostPath("p1", "v")
		require.NoError(t, err)
		clk.Step(time.Minute)
		synctest.Wait()
		require.Len(t, synced, 1, "once")
	})
}
