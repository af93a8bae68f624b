//go:build linux

package volume_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/volume"
)

func TestSubPath(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.setObjects()
	setUp(t, e, pod("p1", configMapVolume("conf", "app"), emptyDir("work", v1.EmptyDirVolumeSource{})))
	conf, _ := e.m.HostPath("p1", "conf")
	work, _ := e.m.HostPath("p1", "work")
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o600))
	// What a container could leave in a volume it writes to.
	require.NoError(t, os.MkdirAll(filepath.Join(work, "real", "deep"), 0o755))
	require.NoError(t, os.Symlink("real/deep", filepath.Join(work, "inside")))
	require.NoError(t, os.Symlink(filepath.Join(work, "real"), filepath.Join(work, "absolute-inside")))
	require.NoError(t, os.Symlink(outside, filepath.Join(work, "absolute-out")))
	require.NoError(t, os.Symlink("../../../..", filepath.Join(work, "relative-out")))
	require.NoError(t, os.Symlink("real/../../", filepath.Join(work, "dotdot-out")))
	require.NoError(t, os.Symlink("loop", filepath.Join(work, "loop")))
	require.NoError(t, os.Symlink("inside/../..", filepath.Join(work, "up"))) // ".." from where "inside" leads

	for _, tc := range []struct {
		volume, sub, want, err string
	}{
		{volume: "conf", sub: "app.conf", want: filepath.Join(conf, readLink(t, conf), "app.conf")},
		{volume: "work", sub: "inside", want: filepath.Join(work, "real", "deep")},
		{volume: "work", sub: "up/real", want: filepath.Join(work, "real")},
		{volume: "work", sub: "absolute-inside/deep", want: filepath.Join(work, "real", "deep")},
		{volume: "work", sub: "new/dirs", want: filepath.Join(work, "new", "dirs")},
		{volume: "work", sub: "", want: work},
		{volume: "work", sub: "absolute-out", err: `leads out of the volume (a link to ` + outside + `)`},
		{volume: "work", sub: "absolute-out/secret", err: "leads out of the volume"},
		{volume: "work", sub: "relative-out/etc", err: "leads out of the volume"},
		{volume: "work", sub: "dotdot-out", err: "leads out of the volume"},
		{volume: "work", sub: "loop", err: "too many levels of symbolic links"},
		{volume: "work", sub: "../p2", err: "must not contain '..'"},
		{volume: "work", sub: "/etc", err: "must not be an absolute path"},
		{volume: "nope", sub: "x", err: "volume: not set up"},
	} {
		t.Run(tc.volume+"/"+tc.sub, func(t *testing.T) {
			got, err := e.m.SubPath("p1", tc.volume, tc.sub)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			f, err := e.m.OpenSubPath("p1", tc.volume, tc.sub)
			require.NoError(t, err)
			defer f.Close()
			real, err := os.Readlink("/proc/self/fd/" + itoa(int(f.Fd())))
			require.NoError(t, err)
			require.Equal(t, tc.want, real, "the descriptor names the same file")
		})
	}
	require.Equal(t, os.FileMode(0o777), mode(t, filepath.Join(work, "new", "dirs")), "made with the volume's mode")
	_, err := os.Stat(filepath.Join(outside, "etc"))
	require.True(t, errors.Is(err, fs.ErrNotExist), "nothing made outside")
}

func TestOpenVolumeFile(t *testing.T) {
	e := newEnv(t, volume.Options{})
	setUp(t, e, pod("p1", emptyDir("work", v1.EmptyDirVolumeSource{})))
	work, _ := e.m.HostPath("p1", "work")
	require.NoError(t, os.WriteFile(filepath.Join(work, "app.env"), []byte("A='1'\n"), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(work, "passwd")))
	require.NoError(t, os.Mkdir(filepath.Join(work, "dir"), 0o755))

	r, err := e.m.OpenVolumeFile("p1", "work", "app.env")
	require.NoError(t, err)
	data, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, "A='1'\n", string(data))

	_, err = e.m.OpenVolumeFile("p1", "work", "missing.env")
	require.ErrorIs(t, err, fs.ErrNotExist, "a missing file is fs.ErrNotExist (an optional fileKeyRef reads nothing)")
	_, err = os.Stat(filepath.Join(work, "missing.env"))
	require.ErrorIs(t, err, fs.ErrNotExist, "and is not created")
	_, err = e.m.OpenVolumeFile("p1", "work", "passwd")
	require.ErrorContains(t, err, "leads out of the volume")
	_, err = e.m.OpenVolumeFile("p1", "work", "dir")
	require.ErrorContains(t, err, "is not a regular file")
	_, err = e.m.OpenVolumeFile("p1", "work", "../../x")
	require.ErrorContains(t, err, "must not contain '..'")
}

func itoa(i int) string {
	return string(appendInt(nil, i))
}

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}
