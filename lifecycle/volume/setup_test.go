package volume_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/lifecycle/podenv/podenvtest"
	"github.com/podkit/podkit/lifecycle/volume"
)

func configMapVolume(name, cm string, items ...v1.KeyToPath) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}, Items: items}}}
}

func secretVolume(name, secret string, items ...v1.KeyToPath) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret, Items: items}}}
}

func (e *env) setObjects() {
	e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Data: map[string]string{"mode": "fast", "app.conf": "listen 80\n"}, BinaryData: map[string][]byte{"logo.bin": {0, 1, 2}}})
	e.objects.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Data: map[string][]byte{"user": []byte("admin"), "password": []byte("s3cret")}})
}

func TestSetUpWritesEachSourceAsTheKubelet(t *testing.T) {
	three := int32(0o400)
	for _, tc := range []struct {
		name   string
		volume v1.Volume
		files  []string
		modes  map[string]os.FileMode
		memory bool
	}{
		{
			name:   "configMap, every key",
			volume: configMapVolume("v", "app"),
			files:  []string{"app.conf=listen 80\n", "logo.bin=\x00\x01\x02", "mode=fast"},
			modes:  map[string]os.FileMode{"mode": 0o644},
		},
		{
			name: "configMap items, paths and modes",
			volume: configMapVolume("v", "app",
				v1.KeyToPath{Key: "mode", Path: "conf/mode.txt", Mode: &three},
				v1.KeyToPath{Key: "app.conf", Path: "nginx.conf"}),
			files: []string{"conf/mode.txt=fast", "nginx.conf=listen 80\n"},
			modes: map[string]os.FileMode{"conf/mode.txt": 0o400, "nginx.conf": 0o644, "conf": 0o755},
		},
		{
			name: "configMap defaultMode",
			volume: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "app"}, DefaultMode: ptr.To[int32](0o600),
				Items: []v1.KeyToPath{{Key: "mode", Path: "mode"}}}}},
			files: []string{"mode=fast"},
			modes: map[string]os.FileMode{"mode": 0o600},
		},
		{
			name:   "secret, on a tmpfs",
			volume: secretVolume("v", "db"),
			files:  []string{"password=s3cret", "user=admin"},
			modes:  map[string]os.FileMode{"password": 0o644},
			memory: true,
		},
		{
			name: "optional configMap that does not exist: empty",
			volume: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}}},
		},
		{
			name: "optional secret whose item key is missing: left out",
			volume: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
				SecretName: "db", Optional: ptr.To(true),
				Items: []v1.KeyToPath{{Key: "nope", Path: "x"}, {Key: "user", Path: "u"}}}}},
			files:  []string{"u=admin"},
			memory: true,
		},
		{
			name: "downwardAPI",
			volume: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "name", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
				{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
			}}}},
			files: []string{"cpu=500", "labels=app=\"web\"", "name=web-p1"},
		},
		{
			name: "projected: configMap, secret and downwardAPI, a later source winning",
			volume: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o640),
				Sources: []v1.VolumeProjection{
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Items: []v1.KeyToPath{{Key: "mode", Path: "same"}}}},
					{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Items: []v1.KeyToPath{{Key: "user", Path: "same"}}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				}}}},
			files:  []string{"ns=team", "same=admin"},
			modes:  map[string]os.FileMode{"same": 0o640, "ns": 0o640},
			memory: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, volume.Options{NodeAllocatable: func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")} }})
			e.setObjects()
			p := pod("p1", tc.volume)
			setUp(t, e, p)
			dir, err := e.m.HostPath("p1", "v")
			require.NoError(t, err)
			require.Equal(t, filepath.Join(e.root, "p1", "v"), dir)
			require.Equal(t, tc.files, tree(t, dir))
			for path, want := range tc.modes {
				require.Equal(t, want, mode(t, filepath.Join(dir, path)), path)
			}
			_, mounted := e.tmpfs.size(dir)
			require.Equal(t, tc.memory, mounted, "on a tmpfs")
			require.Empty(t, e.events.take())
		})
	}
}

func TestSetUpLayoutIsTheAtomicWritersLinks(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.setObjects()
	setUp(t, e, pod("p1", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "conf/mode"})))
	dir, err := e.m.HostPath("p1", "v")
	require.NoError(t, err)
	link, err := os.Readlink(filepath.Join(dir, "conf"))
	require.NoError(t, err)
	require.Equal(t, "..data/conf", link)
	ts, err := os.Readlink(filepath.Join(dir, "..data"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(ts, "..2"), "..data points to a timestamped directory, not %q", ts)
	fi, err := os.Lstat(filepath.Join(dir, ts, "conf", "mode"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
}

func TestSetUpUpdatesWhenTheSourceChanges(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.setObjects()
	p := pod("p1", configMapVolume("v", "app"))
	setUp(t, e, p)
	dir, _ := e.m.HostPath("p1", "v")
	first, err := os.Readlink(filepath.Join(dir, "..data"))
	require.NoError(t, err)

	setUp(t, e, p)
	again, _ := os.Readlink(filepath.Join(dir, "..data"))
	require.Equal(t, first, again, "an unchanged source writes nothing")

	e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string]string{"mode": "slow", "new": "1"}})
	setUp(t, e, p)
	require.Equal(t, []string{"mode=slow", "new=1"}, tree(t, dir), "app.conf and logo.bin are gone, new came")
	second, _ := os.Readlink(filepath.Join(dir, "..data"))
	require.NotEqual(t, first, second)
	require.ElementsMatch(t, []string{"..data", second, first, "mode", "new"}, entries(t, dir),
		"the links of removed keys are gone; the previous version stays until the next write, for readers resolving a path meanwhile")

	e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string]string{"mode": "third"}})
	setUp(t, e, p)
	third, _ := os.Readlink(filepath.Join(dir, "..data"))
	require.ElementsMatch(t, []string{"..data", third, second, "mode"}, entries(t, dir), "the first version is gone")
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, en := range list {
		names = append(names, en.Name())
	}
	return names
}

func TestSetUpFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		volume v1.Volume
		msg    string
	}{
		{"missing configMap", configMapVolume("v", "nope"), `configmap "nope" not found`},
		{"missing secret", secretVolume("v", "nope"), `secret "nope" not found`},
		{"missing configMap key", configMapVolume("v", "app", v1.KeyToPath{Key: "nope", Path: "x"}), "configmap references non-existent config key: nope"},
		{"missing secret key", secretVolume("v", "db", v1.KeyToPath{Key: "nope", Path: "x"}), "references non-existent secret key: nope"},
		{"path with ..", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "../../etc/passwd"}), "invalid path: must not contain '..': ../../etc/passwd"},
		{"absolute path", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "/etc/passwd"}), "invalid path: must be relative path: /etc/passwd"},
		{"the writer's names", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "..data/x"}), "invalid path: must not start with '..': ..data/x"},
		{"the volume itself", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "a/.."}), "invalid path: must not contain '..': a/.."},
		{"dot", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "./"}), `invalid path "./": names the volume itself`},
		{"file and directory", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "a"}, v1.KeyToPath{Key: "app.conf", Path: "a/b"}), `invalid path: "a" is a file and the directory of "a/b"`},
		{"long name", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: strings.Repeat("x", 256)}), "invalid path: filenames must be less than or equal to 255 characters"},
		{"bad mode", configMapVolume("v", "app", v1.KeyToPath{Key: "mode", Path: "m", Mode: ptr.To[int32](0o4755)}), `invalid mode 04755 for path "m": must be within 0000 and 0777`},
		{"downward field of the spec", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}},
			{Path: "c", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}},
		}}}}, "unsupported fieldPath: spec.nodeName\nresourceFieldRef \"limits.cpu\" names no container"},
		{"token without a requester", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
		}}}}, "this node has no TokenRequester for serviceAccountToken projections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, volume.Options{})
			e.setObjects()
			p := pod("p1", tc.volume, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
			err := e.m.SetUp(context.Background(), p)
			var me *volume.MountError
			require.ErrorAs(t, err, &me)
			require.Equal(t, "team/web-p1", me.Pod)
			require.Len(t, me.Volumes, 1)
			require.Equal(t, "v", me.Volumes[0].Name)
			require.EqualError(t, me.Volumes[0].Err, tc.msg)
			require.Equal(t, `volume: pod team/web-p1: unmounted volumes=[v]: volume "v": `+tc.msg, err.Error())
			require.Equal(t, strings.HasSuffix(tc.msg, "not found"), apierrors.IsNotFound(err), "the getter's error is in the chain")
			require.Equal(t, []string{`Warning FailedMount MountVolume.SetUp failed for volume "v" : ` + tc.msg}, e.events.take())
			_, err = e.m.HostPath("p1", "v")
			require.ErrorIs(t, err, volume.ErrNotSetUp)
			_, err = e.m.HostPath("p1", "scratch")
			require.NoError(t, err, "the other volumes are ready")
		})
	}
}

func TestSetUpRefusesKeysThatTraverse(t *testing.T) {
	e := newEnv(t, volume.Options{})
	// A getter backed by files could hold keys no API server accepts.
	e.objects.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "odd"},
		Data: map[string][]byte{"../../../etc/cron.d/evil": []byte("x")}})
	err := e.m.SetUp(context.Background(), pod("p1", secretVolume("v", "odd")))
	require.ErrorContains(t, err, "invalid path: must not contain '..': ../../../etc/cron.d/evil")
	_, statErr := os.Stat(filepath.Join(e.root, "..", "etc"))
	require.True(t, errors.Is(statErr, os.ErrNotExist), "nothing was written outside the volume")
}

func TestSetUpBounds(t *testing.T) {
	e := newEnv(t, volume.Options{MaxVolumeFiles: 3, MaxVolumeBytes: 100})
	e.objects.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}, Data: map[string][]byte{"k": make([]byte, 1<<20+1)}})
	e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "many"}, Data: map[string]string{"a": "", "b": "", "c": "", "d": ""}})
	e.objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Data: map[string]string{"a": strings.Repeat("x", 101)}})
	for _, tc := range []struct {
		v   v1.Volume
		msg string
	}{
		{secretVolume("v", "huge"), "secret team/huge holds 1048577 bytes of data and 1 of keys, more than the 1048576 the API allows"},
		{configMapVolume("v", "many"), "the volume would hold 4 files, more than this node's limit of 3"},
		{configMapVolume("v", "big"), "the volume would hold 101 bytes, more than this node's limit of 100"},
	} {
		err := e.m.SetUp(context.Background(), pod("p1", tc.v))
		var me *volume.MountError
		require.ErrorAs(t, err, &me)
		require.EqualError(t, me.Volumes[0].Err, tc.msg)
	}
}

func TestSetUpBadInput(t *testing.T) {
	e := newEnv(t, volume.Options{})
	ctx := context.Background()
	require.EqualError(t, e.m.SetUp(ctx, nil), "volume: SetUp needs a pod")
	require.EqualError(t, e.m.SetUp(ctx, pod("")), `volume: invalid pod UID ""`)
	require.EqualError(t, e.m.SetUp(ctx, pod("../x")), `volume: invalid pod UID "../x"`)
	require.EqualError(t, e.m.SetUp(ctx, pod(".hidden")), `volume: invalid pod UID ".hidden"`)
	bad := pod("p1", v1.Volume{Name: "../up", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	require.ErrorContains(t, e.m.SetUp(ctx, bad), `volume: pod team/web-p1: invalid volume name "../up"`)
	dup := pod("p1", v1.Volume{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, v1.Volume{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	require.EqualError(t, e.m.SetUp(ctx, dup), `volume: pod team/web-p1: two volumes are named "a"`)
	pvc := pod("p1", v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
	var ue *volume.UnsupportedError
	require.ErrorAs(t, e.m.SetUp(ctx, pvc), &ue)
	_, err := e.m.HostPath("p1", "data")
	require.ErrorIs(t, err, volume.ErrNotSetUp)

	// A hostPath volume is the runtime's: SetUp leaves it alone.
	hp := pod("p2", v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc"}}})
	require.NoError(t, e.m.SetUp(ctx, hp))
	_, err = e.m.HostPath("p2", "host")
	require.ErrorIs(t, err, volume.ErrNotSetUp)

	for _, tc := range []struct {
		root string
		opts volume.Options
		msg  string
	}{
		{"", volume.Options{}, "volume: New needs a root directory"},
		{t.TempDir(), volume.Options{RefreshInterval: -1}, "volume: Options.RefreshInterval is -1ns; want 0 (the default, 1m0s) or more"},
		{t.TempDir(), volume.Options{MaxVolumeFiles: -1}, "volume: Options.MaxVolumeBytes (0), MaxVolumeFiles (-1) and MaxUsageEntries (0) may not be negative"},
	} {
		_, err := volume.New(tc.root, nil, e.window, tc.opts)
		require.EqualError(t, err, tc.msg)
	}
	_, err = volume.New(t.TempDir(), nil, nil, volume.Options{})
	require.EqualError(t, err, "volume: New needs a ContentRemovalChecker (the engine's window)")
}

func TestSetUpWithoutGetter(t *testing.T) {
	m, err := volume.New(t.TempDir(), nil, newWindow(), volume.Options{Tmpfs: newTmpfs(), MapIDs: selfOwned})
	require.NoError(t, err)
	err = m.SetUp(context.Background(), pod("p1", configMapVolume("v", "app"), secretVolume("s", "db")))
	require.ErrorContains(t, err, `volume "v": couldn't get configMap team/app, no getter for config maps; volume "s": couldn't get secret team/db, no getter for secrets`)
}

func TestSetUpSurvivesPanics(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.objects.SetError(podenvtest.KindConfigMap, ns, "app", errors.New("unused"))
	m, err := volume.New(t.TempDir(), panicking{}, e.window, volume.Options{Tmpfs: e.tmpfs, Recorder: e.events.recorder(),
		MapIDs:          func(*v1.Pod, int, int) (int, int, error) { panic("mapping bug") },
		NodeAllocatable: func() v1.ResourceList { panic("allocatable bug") },
		Tokens: volume.TokenRequesterFunc(func(context.Context, string, string, *authnRequest) (*authnRequest, error) {
			panic("token bug")
		}),
	})
	require.NoError(t, err)
	err = m.SetUp(context.Background(), pod("p1", configMapVolume("v", "app")))
	require.ErrorContains(t, err, "the id mapping panicked: mapping bug")

	m, err = volume.New(t.TempDir(), panicking{}, e.window, volume.Options{Tmpfs: e.tmpfs, MapIDs: selfOwned,
		NodeAllocatable: func() v1.ResourceList { panic("allocatable bug") },
		Tokens: volume.TokenRequesterFunc(func(context.Context, string, string, *authnRequest) (*authnRequest, error) {
			panic("token bug")
		}),
	})
	require.NoError(t, err)
	err = m.SetUp(context.Background(), pod("p1",
		configMapVolume("v", "app"),
		v1.Volume{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory"}}}}}},
	))
	require.ErrorContains(t, err, `volume "v": GetConfigMap team/app panicked: configmap getter bug; volume "t": failed to fetch token: RequestToken panicked: token bug`)
	_, err = m.HostPath("p1", "d")
	require.NoError(t, err, "a panicking NodeAllocatable leaves limits unset")
}

// panicking is a getter that panics.
type panicking struct{}

func (panicking) GetSecret(context.Context, string, string) (*v1.Secret, error) {
	panic("secret getter bug")
}
func (panicking) GetConfigMap(context.Context, string, string) (*v1.ConfigMap, error) {
	panic("configmap getter bug")
}

func TestSetUpRefusesARemovablePod(t *testing.T) {
	e := newEnv(t, volume.Options{})
	e.window.remove("p1")
	err := e.m.SetUp(context.Background(), pod("p1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}))
	require.ErrorIs(t, err, volume.ErrContentRemovable)
	_, statErr := os.Stat(filepath.Join(e.root, "p1"))
	require.True(t, errors.Is(statErr, os.ErrNotExist), "nothing is created for it")
}
