//go:build linux

package volume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/lifecycle/volume"
)

// userNamespace maps a pod's ids as a runtime running it in a user
// namespace would: onto 65536 host ids from 100000.
func userNamespace(_ *v1.Pod, uid, gid int) (int, int, error) {
	if uid > 65535 || gid > 65535 {
		return 0, 0, fmt.Errorf("%d:%d is outside the pod's 65536 ids", uid, gid)
	}
	return 100000 + uid, 100000 + gid, nil
}

func owner(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

func TestOwnersAreThePodsMappedIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting other owners needs root")
	}
	clk := testingclock.NewFakeClock(epoch)
	e := newEnv(t, volume.Options{MapIDs: userNamespace, Clock: clk, Tokens: &tokens{clock: clk}})
	e.setObjects()
	p := pod("p1",
		configMapVolume("conf", "app", v1.KeyToPath{Key: "mode", Path: "sub/mode"}, v1.KeyToPath{Key: "app.conf", Path: "mine", User: ptr.To[int64](1000)}),
		emptyDir("work", v1.EmptyDirVolumeSource{}),
		tokenVolume("token", v1.ServiceAccountTokenProjection{Path: "token"}),
	)
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000), RunAsUser: ptr.To[int64](500)}
	setUp(t, e, p)
	conf, _ := e.m.HostPath("p1", "conf")
	ts := readLink(t, conf)
	for path, want := range map[string]string{
		conf:                                "100000:102000",
		filepath.Join(conf, "..data"):       "100000:102000",
		filepath.Join(conf, "sub"):          "100000:102000",
		filepath.Join(conf, ts, "sub"):      "100000:102000",
		filepath.Join(conf, ts, "sub/mode"): "100000:102000",
		filepath.Join(conf, ts, "mine"):     "101000:102000",
	} {
		require.Equal(t, want, owner(t, path), path)
	}
	require.Equal(t, os.FileMode(0o644), mode(t, filepath.Join(conf, "sub/mode")), "0644 | group read")
	work, _ := e.m.HostPath("p1", "work")
	require.Equal(t, "100000:102000", owner(t, work))
	tok, _ := e.m.HostPath("p1", "token")
	require.Equal(t, "100500:102000", owner(t, filepath.Join(tok, readLink(t, tok), "token")), "the containers' common user owns the token")
	require.Equal(t, os.FileMode(0o640), mode(t, filepath.Join(tok, "token")))

	outside := pod("p2", emptyDir("work", v1.EmptyDirVolumeSource{}))
	outside.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](70000)}
	err := e.m.SetUp(context.Background(), outside)
	require.ErrorContains(t, err, "mapping owner 0:70000 to the host: 0:70000 is outside the pod's 65536 ids")
}

func TestRealTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting tmpfs needs root")
	}
	e := newEnv(t, volume.Options{Tmpfs: volume.LinuxTmpfs{}})
	e.setObjects()
	limit := resource.MustParse("1Mi")
	p := pod("p1", secretVolume("s", "db"), emptyDir("mem", v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}))
	setUp(t, e, p)
	t.Cleanup(func() {
		// Leave no mount behind, whatever happened.
		for _, v := range []string{"s", "mem"} {
			_ = syscall.Unmount(filepath.Join(e.root, "p1", v), syscall.MNT_DETACH)
		}
	})
	for _, v := range []string{"s", "mem"} {
		dir, _ := e.m.HostPath("p1", v)
		var st syscall.Statfs_t
		require.NoError(t, syscall.Statfs(dir, &st))
		require.Equal(t, int64(0x01021994), int64(st.Type), "%s is on a tmpfs", v)
	}
	mem, _ := e.m.HostPath("p1", "mem")
	ok, err := volume.LinuxTmpfs{}.IsMountPoint(mem)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = volume.LinuxTmpfs{}.IsMountPoint(filepath.Join(e.root, "p1"))
	require.NoError(t, err)
	require.False(t, ok, "the pod's directory is not a mount")
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mem, &st))
	require.Equal(t, uint64(1<<20), st.Blocks*uint64(st.Bsize), "as large as its sizeLimit")
	require.Equal(t, os.FileMode(0o777), mode(t, mem))
	err = os.WriteFile(filepath.Join(mem, "big"), make([]byte, 2<<20), 0o644)
	require.ErrorIs(t, err, syscall.ENOSPC, "the kernel holds it to its limit")
	setUp(t, e, p)

	e.window.remove("p1")
	removed, err := e.m.TearDown("p1")
	require.NoError(t, err)
	require.True(t, removed)
	ok, err = volume.LinuxTmpfs{}.IsMountPoint(mem)
	require.Error(t, err, "the directory is gone")
	require.False(t, ok)
}
