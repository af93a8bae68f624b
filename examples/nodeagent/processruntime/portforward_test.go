package processruntime_test

import (
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// forward runs PortForward to port of pod, sends request, closes its
// sending side, and returns all the pod's server answered.
func forward(t *testing.T, rt *processruntime.Runtime, pod *v1.Pod, port int32, request string) (string, error) {
	t.Helper()
	client, server := streamPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rt.PortForward(ctx, pod.UID, port, server) }()
	go func() {
		_, _ = client.Write([]byte(request))
		_ = client.CloseWrite()
	}()
	answer, _ := io.ReadAll(client)
	client.Close()
	return string(answer), <-done
}

// streamPair is a connected pair of unix stream sockets, which close
// one way as a TCP connection does (a client's end of input).
func streamPair(t *testing.T) (client, server *net.UnixConn) {
	t.Helper()
	// Close-on-exec under the fork lock, as the standard library does where
	// SOCK_CLOEXEC does not exist: no child forked meanwhile inherits them.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	require.NoError(t, err)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		require.NoError(t, err)
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// httpServerPod serves its hostname over HTTP on port 8080 of its pod.
func httpServerPod() *v1.Pod {
	return newPod(v1.RestartPolicyNever, "c", `mkdir -p /tmp/www; hostname > /tmp/www/index.html; exec busybox httpd -f -p 127.0.0.1:8080 -h /tmp/www`)
}

// Port-forward reaches a server listening on the pod's own loopback, in
// its network namespace, with or without a pod network, and leaves every
// thread of the agent in the host's namespace; a port nothing listens on
// is an error.
func TestPortForwardReachesThePodsPort(t *testing.T) {
	needBusybox(t)
	t.Parallel()
	cidr := podrangetest.Range(t)
	for name, opts := range map[string]processruntime.Options{
		"LoopbackOnly": {},
		"PodNetwork":   {PodCIDR: cidr, BridgeName: podrangetest.Bridge(t, "pkf")},
	} {
		t.Run(name, func(t *testing.T) {
			rt := sandboxed(t, opts)
			if opts.PodCIDR.IsValid() {
				t.Cleanup(func() { require.NoError(t, rt.TeardownNetwork(context.Background())) })
			}
			pod := httpServerPod()
			waitRunning(t, rt, pod, "c")
			t.Cleanup(func() { terminate(t, rt, pod, 1) })
			var answer string
			eventually(t, 10*time.Second, "the pod's server answers", func() bool {
				a, err := forward(t, rt, pod, 8080, "GET / HTTP/1.0\r\n\r\n")
				answer = a
				return err == nil && strings.Contains(a, "200 OK")
			})
			assert.True(t, strings.HasSuffix(answer, "\r\n\r\n"+pod.Name+"\n"), "the pod's own server: %q", answer)
			requireThreadsInHostNetns(t)

			_, err := forward(t, rt, pod, 8081, "")
			assert.ErrorIs(t, err, syscall.ECONNREFUSED)
			_, err = forward(t, rt, pod, 0, "")
			assert.ErrorContains(t, err, "out of range")
			requireThreadsInHostNetns(t)
		})
	}
}

// A pod run without a sandbox is in the host's network: port-forward
// reaches the host's loopback.
func TestPortForwardToAPodOfTheHostsNetwork(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 1000")
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	port, _ := strconv.Atoi(strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:"))
	answer, err := forward(t, rt, pod, int32(port), "echoed back")
	require.NoError(t, err)
	assert.Equal(t, "echoed back", answer, "both ways, the client's end of input reaching the server")

	_, err = forward(t, rt, newPod(v1.RestartPolicyNever, "c", "true"), 80, "")
	assert.ErrorIs(t, err, processruntime.ErrNotFound)
}

// requireThreadsInHostNetns checks that every thread of the test binary
// is in its network namespace.
func requireThreadsInHostNetns(t *testing.T) {
	t.Helper()
	host, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		ns, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net")
		if err != nil {
			continue // the thread ended meanwhile
		}
		require.Equal(t, host, ns, "thread %s is in another network namespace", task.Name())
	}
}
