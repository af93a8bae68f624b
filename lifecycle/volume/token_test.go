package volume_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/lifecycle/volume"
)

type authnRequest = authenticationv1.TokenRequest

// tokens is a fake TokenRequester: token N is "token-N", valid for the
// seconds asked (or grant, when set) from the clock's now.
type tokens struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	calls []string
	fail  error
	grant int64
}

func (f *tokens) RequestToken(_ context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref := req.Spec.BoundObjectRef
	f.calls = append(f.calls, fmt.Sprintf("%s/%s aud=%v exp=%d bound=%s/%s/%s", namespace, sa, req.Spec.Audiences, *req.Spec.ExpirationSeconds, ref.Kind, ref.Name, ref.UID))
	if f.fail != nil {
		return nil, f.fail
	}
	seconds := *req.Spec.ExpirationSeconds
	if f.grant != 0 {
		seconds = f.grant
	}
	resp := req.DeepCopy()
	resp.Spec.ExpirationSeconds = &seconds
	resp.Status.Token = fmt.Sprintf("token-%d", len(f.calls))
	resp.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(seconds) * time.Second))
	return resp, nil
}

func (f *tokens) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func tokenVolume(name string, sources ...v1.ServiceAccountTokenProjection) v1.Volume {
	var projections []v1.VolumeProjection
	for i := range sources {
		projections = append(projections, v1.VolumeProjection{ServiceAccountToken: &sources[i]})
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: projections}}}
}

func TestTokenIsRequestedBoundToThePodAndCached(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	tr := &tokens{clock: clk}
	e := newEnv(t, volume.Options{Clock: clk, Tokens: tr})
	p := pod("p1", tokenVolume("kube-api",
		v1.ServiceAccountTokenProjection{Path: "token"},
		v1.ServiceAccountTokenProjection{Path: "vault", Audience: "vault", ExpirationSeconds: ptr.To[int64](7200)}))
	setUp(t, e, p)
	setUp(t, e, p)
	require.Equal(t, []string{
		"team/robot aud=[] exp=3600 bound=Pod/web-p1/p1",
		"team/robot aud=[vault] exp=7200 bound=Pod/web-p1/p1",
	}, tr.calls, "one request per (pod, audience, path); the second SetUp reads the cache")
	dir, _ := e.m.HostPath("p1", "kube-api")
	require.Equal(t, []string{"token=token-1", "vault=token-2"}, tree(t, dir))
	require.Equal(t, os.FileMode(0o644), mode(t, filepath.Join(dir, "token")), "the volume's mode when the pod's root owns it")
	_, onTmpfs := e.tmpfs.size(dir)
	require.True(t, onTmpfs, "a token never reaches the disk")
}

func TestTokenModeFollowsItsOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(*v1.Pod)
		want    os.FileMode
		wantDir os.FileMode
	}{
		{"every container runs as one user: theirs, 0600", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
		}, 0o600, 0o755},
		{"containers run as different users: root's", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "b", SecurityContext: &v1.SecurityContext{RunAsUser: ptr.To[int64](2000)}})
		}, 0o644, 0o755},
		{"fsGroup: 0640", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](3000)}
		}, 0o640, 0o755 | os.ModeSetgid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			e := newEnv(t, volume.Options{Clock: clk, Tokens: &tokens{clock: clk}})
			p := pod("p1", tokenVolume("t", v1.ServiceAccountTokenProjection{Path: "token"}))
			tc.setup(p)
			setUp(t, e, p)
			dir, _ := e.m.HostPath("p1", "t")
			require.Equal(t, tc.want, mode(t, filepath.Join(dir, "token")))
			require.Equal(t, tc.wantDir, mode(t, dir))
		})
	}
}

func TestTokenIsRefreshedBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		tr := &tokens{clock: clk}
		e := newEnv(t, volume.Options{Clock: clk, Tokens: tr, RefreshInterval: time.Hour})
		setUp(t, e, pod("p1", tokenVolume("t", v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](1000)})))
		dir, _ := e.m.HostPath("p1", "t")
		token := func() string { return readFile(t, filepath.Join(dir, "token")) }
		stop := running(t, e)
		defer stop()
		require.Equal(t, 1, tr.count(), "Run's first pass reads the cache")

		clk.Step(799 * time.Second)
		synctest.Wait()
		require.Equal(t, "token-1", token(), "not before 80% of its lifetime")
		clk.Step(time.Second)
		synctest.Wait()
		require.Equal(t, "token-2", token(), "refreshed at 80%, by Run, between refreshes")

		// A failed refresh keeps a token that is still valid, and tries
		// again 10 s later.
		tr.mu.Lock()
		tr.fail = errors.New("apiserver unavailable")
		tr.mu.Unlock()
		clk.Step(800 * time.Second)
		synctest.Wait()
		require.Equal(t, "token-2", token())
		require.Equal(t, 3, tr.count())
		require.Empty(t, e.events.take(), "no event while the token is valid")
		clk.Step(10 * time.Second)
		synctest.Wait()
		require.Equal(t, 4, tr.count(), "retried")

		// Once it expired, the volume fails (and keeps its last content).
		clk.Step(190 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{`Warning FailedMount MountVolume.SetUp failed for volume "t" : token of service account team/robot expired and refresh failed: apiserver unavailable`}, e.events.take())

		tr.mu.Lock()
		tr.fail = nil
		tr.mu.Unlock()
		clk.Step(10 * time.Second)
		synctest.Wait()
		require.Equal(t, "token-"+fmt.Sprint(tr.count()), token(), "a fresh token once the server answers")
	})
}

func TestTokenOlderThanADayIsRefreshed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		tr := &tokens{clock: clk, grant: 365 * 24 * 3600} // an extended token, as API servers grant
		e := newEnv(t, volume.Options{Clock: clk, Tokens: tr, RefreshInterval: 100 * time.Hour})
		setUp(t, e, pod("p1", tokenVolume("t", v1.ServiceAccountTokenProjection{Path: "token"})))
		stop := running(t, e)
		defer stop()
		clk.Step(24*time.Hour - time.Second)
		synctest.Wait()
		require.Equal(t, 1, tr.count())
		clk.Step(time.Second)
		synctest.Wait()
		require.Equal(t, 2, tr.count(), "refreshed at 24 h, whatever its lifetime")
	})
}

func TestTokenBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  v1.ServiceAccountTokenProjection
		pod  func(*v1.Pod)
		resp func(*authenticationv1.TokenRequest)
		msg  string
	}{
		{name: "too short", src: v1.ServiceAccountTokenProjection{Path: "t", ExpirationSeconds: ptr.To[int64](60)}, msg: "serviceAccountToken expirationSeconds 60 is below the minimum of 600"},
		{name: "no service account", src: v1.ServiceAccountTokenProjection{Path: "t"}, pod: func(p *v1.Pod) { p.Spec.ServiceAccountName = "" }, msg: "the pod names no service account for its serviceAccountToken projection"},
		{name: "no token", src: v1.ServiceAccountTokenProjection{Path: "t"}, resp: func(r *authenticationv1.TokenRequest) { r.Status.Token = "" }, msg: "failed to fetch token: the TokenRequest response holds no token"},
		{name: "no expiry", src: v1.ServiceAccountTokenProjection{Path: "t"}, resp: func(r *authenticationv1.TokenRequest) { r.Status.ExpirationTimestamp = metav1.Time{} }, msg: "failed to fetch token: the TokenRequest response has no expiration time"},
		{name: "huge token", src: v1.ServiceAccountTokenProjection{Path: "t"}, resp: func(r *authenticationv1.TokenRequest) { r.Status.Token = string(make([]byte, 65<<10)) }, msg: "failed to fetch token: the TokenRequest response holds a token of 66560 bytes, more than 65536"},
		{name: "path traversal", src: v1.ServiceAccountTokenProjection{Path: "../token"}, msg: "invalid path: must not contain '..': ../token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			tr := &tokens{clock: clk}
			var req volume.TokenRequester = tr
			if tc.resp != nil {
				req = volume.TokenRequesterFunc(func(ctx context.Context, ns, sa string, r *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
					resp, err := tr.RequestToken(ctx, ns, sa, r)
					tc.resp(resp)
					return resp, err
				})
			}
			e := newEnv(t, volume.Options{Clock: clk, Tokens: req})
			p := pod("p1", tokenVolume("t", tc.src))
			if tc.pod != nil {
				tc.pod(p)
			}
			err := e.m.SetUp(context.Background(), p)
			var me *volume.MountError
			require.ErrorAs(t, err, &me)
			require.EqualError(t, me.Volumes[0].Err, tc.msg)
		})
	}
}

func TestTokenOfAStoppedPodIsNotRefreshed(t *testing.T) {
	// The real clock, in the bubble's time: a timer already due fires at
	// once, as it would in production, so a Run that kept waking for the
	// refresh it may not do would never block again.
	synctest.Test(t, func(t *testing.T) {
		clk := clock.RealClock{}
		tr := &tokens{clock: clk}
		e := newEnv(t, volume.Options{Clock: clk, Tokens: tr, RefreshInterval: time.Hour})
		setUp(t, e, pod("p1", tokenVolume("t", v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](1000)})))
		stop := running(t, e)
		defer stop()
		e.window.stop("p1")
		// Advances the bubble's clock past the refresh time (no real wait).
		time.Sleep(900 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, tr.count(), "no container can read it: no refresh")
	})
}
