package action

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
)

// target splits a test server's URL into the host and the port of an
// httpGet action.
func target(t *testing.T, rawURL string) (host string, get *v1.HTTPGetAction) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	p, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return u.Hostname(), &v1.HTTPGetAction{Port: intstr.FromInt32(int32(p))}
}

func TestHTTPProbeStatuses(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a redirect to another host must not be followed")
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) // another host name
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = fmt.Fprint(w, "healthy")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/same":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, otherURL+"/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/missing":
			http.Error(w, "secret detail", http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	h := NewHTTP("probe")
	host, get := target(t, srv.URL)
	for _, tc := range []struct {
		path    string
		outcome Outcome
		output  string
	}{
		{"/ok", Success, "healthy"},
		{"/nocontent", Success, ""},
		{"/same", Success, "healthy"},
		{"/away", Warning, "Probe terminated redirects, Response body: "},
		{"/missing", Failure, "HTTP probe failed with statuscode: 404"},
		{"/boom", Failure, "HTTP probe failed with statuscode: 500"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := *get
			g.Path = tc.path
			res := h.Probe(context.Background(), &g, &v1.Container{}, host)
			assert.Equal(t, tc.outcome, res.Outcome, res.Output)
			if tc.outcome == Warning {
				assert.True(t, strings.HasPrefix(res.Output, tc.output), res.Output)
			} else {
				assert.Equal(t, tc.output, res.Output)
			}
			assert.NoError(t, res.Err)
		})
	}
	t.Run("redirect loop", func(t *testing.T) {
		g := *get
		g.Path = "/loop"
		res := h.Probe(context.Background(), &g, &v1.Container{}, host)
		assert.Equal(t, Failure, res.Outcome)
		assert.Contains(t, res.Output, "stopped after 10 redirects")
	})
}

func TestHTTPProbeRequest(t *testing.T) {
	type seen struct {
		host, ua, accept, custom, path string
		acceptSet                      bool
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, acceptSet := r.Header["Accept"]
		got <- seen{r.Host, r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("X-Custom"), r.URL.RequestURI(), acceptSet}
	}))
	defer srv.Close()
	h := NewHTTP("probe")
	host, get := target(t, srv.URL)

	get.Path = "/healthz?verbose=1"
	get.HTTPHeaders = []v1.HTTPHeader{{Name: "x-custom", Value: "v"}, {Name: "Host", Value: "app.example"}}
	res := h.Probe(context.Background(), get, &v1.Container{}, host)
	require.Equal(t, Success, res.Outcome, res.Output)
	s := <-got
	assert.Equal(t, seen{host: "app.example", ua: "kube-probe/1.37", accept: "*/*", custom: "v", path: "/healthz?verbose=1", acceptSet: true}, s)

	get.HTTPHeaders = []v1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: ""}}
	res = h.Probe(context.Background(), get, &v1.Container{}, host)
	require.Equal(t, Success, res.Outcome, res.Output)
	s = <-got
	assert.Equal(t, "mine", s.ua)
	assert.False(t, s.acceptSet, "an empty Accept removes the header")

	// The action's own host wins over the pod's.
	get.HTTPHeaders = nil
	get.Host = host
	res = NewHTTP("lifecycle").Probe(context.Background(), get, &v1.Container{}, "192.0.2.1")
	require.Equal(t, Success, res.Outcome, res.Output)
	s = <-got
	assert.Equal(t, "kube-lifecycle/1.37", s.ua)
}

func TestHTTPProbeHTTPSWithoutVerification(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, r.Proto)
	}))
	defer srv.Close()
	host, get := target(t, srv.URL)
	get.Scheme = v1.URISchemeHTTPS
	res := NewHTTP("probe").Probe(context.Background(), get, &v1.Container{}, host)
	assert.Equal(t, Success, res.Outcome, res.Output)
}

func TestHTTPProbeH2C(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
		}
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	host, get := target(t, srv.URL)
	h := NewHTTP("probe")
	res := h.Probe(context.Background(), get, &v1.Container{}, host)
	assert.Equal(t, Failure, res.Outcome, "HTTP/1.1 by default")
	h2 := v1.HTTPProtocolHTTP2
	get.Protocol = &h2
	res = h.Probe(context.Background(), get, &v1.Container{}, host)
	assert.Equal(t, Success, res.Outcome, res.Output)
}

func TestHTTPProbeBodyIsCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, strings.Repeat("y", 1<<20))
	}))
	defer srv.Close()
	host, get := target(t, srv.URL)
	res := NewHTTP("probe").Probe(context.Background(), get, &v1.Container{}, host)
	assert.Equal(t, Success, res.Outcome)
	assert.Len(t, res.Output, MaxOutput)
}

func TestHTTPProbeTimeout(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	host, get := target(t, srv.URL)
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
	defer cancel()
	got := make(chan Result, 1)
	go func() { got <- NewHTTP("probe").Probe(ctx, get, &v1.Container{}, host) }()
	<-arrived
	clk.Step(time.Second)
	res := <-got
	assert.Equal(t, Failure, res.Outcome)
	assert.Equal(t, fmt.Sprintf(`Get "%s": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, srv.URL), res.Output)
}

func TestHTTPProbeCannotBeMade(t *testing.T) {
	h := NewHTTP("probe")
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 1}}}
	res := h.Probe(context.Background(), &v1.HTTPGetAction{Port: intstr.FromString("nope")}, c, "127.0.0.1")
	assert.Equal(t, Unknown, res.Outcome)
	assert.EqualError(t, res.Err, `port "nope" not found`)
	res = h.Probe(context.Background(), &v1.HTTPGetAction{Port: intstr.FromString("web")}, c, "")
	assert.Equal(t, Unknown, res.Outcome)
	assert.ErrorContains(t, res.Err, "no host")
	res = h.Probe(context.Background(), nil, c, "127.0.0.1")
	assert.Equal(t, Unknown, res.Outcome)
}

func TestHTTPProbeConnectionRefused(t *testing.T) {
	port := closedPort(t)
	res := NewHTTP("probe").Probe(context.Background(), &v1.HTTPGetAction{Port: intstr.FromInt32(int32(port))}, &v1.Container{}, "127.0.0.1")
	assert.Equal(t, Failure, res.Outcome)
	assert.Contains(t, res.Output, "connection refused")
}

func TestHTTPHook(t *testing.T) {
	auth := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	h := NewHTTP("lifecycle")
	host, get := target(t, srv.URL)

	fellBack, err := h.Hook(context.Background(), get, &v1.Container{}, host)
	assert.NoError(t, err, "the kubelet does not read a hook response's status")
	assert.False(t, fellBack)
	<-auth

	get.Scheme = v1.URISchemeHTTPS
	get.HTTPHeaders = []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer x"}}
	fellBack, err = h.Hook(context.Background(), get, &v1.Container{}, host)
	assert.NoError(t, err)
	assert.True(t, fellBack, "HTTPS answered in HTTP is sent again as HTTP")
	assert.Equal(t, "", <-auth, "without its Authorization header")

	_, err = h.Hook(context.Background(), &v1.HTTPGetAction{Port: intstr.FromInt32(int32(closedPort(t)))}, &v1.Container{}, "127.0.0.1")
	assert.ErrorContains(t, err, "connection refused")
	_, err = h.Hook(context.Background(), &v1.HTTPGetAction{Port: intstr.FromString("x")}, &v1.Container{}, "127.0.0.1")
	assert.EqualError(t, err, `port "x" not found`)
}

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}
