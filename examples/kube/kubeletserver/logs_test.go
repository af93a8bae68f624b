package kubeletserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

func TestParseLogOptions(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		query  string
		want   *v1.PodLogOptions
		status int
		msg    string
	}{
		{query: "", want: &v1.PodLogOptions{}},
		{query: "follow=true&previous=1&timestamps=true", want: &v1.PodLogOptions{Follow: true, Previous: true, Timestamps: true}},
		{query: "tailLines=3&limitBytes=100", want: &v1.PodLogOptions{TailLines: ptr.To[int64](3), LimitBytes: ptr.To[int64](100)}},
		{query: "tailLines=0", want: &v1.PodLogOptions{TailLines: ptr.To[int64](0)}},
		{query: "tail=5", want: &v1.PodLogOptions{TailLines: ptr.To[int64](5)}},
		{query: "tail=all", want: &v1.PodLogOptions{}},
		{query: "sinceSeconds=10", want: &v1.PodLogOptions{SinceTime: ptrTime(now.Add(-10 * time.Second))}},
		{query: "sinceTime=2026-12-01T09:00:00Z", want: &v1.PodLogOptions{SinceTime: ptrTime(now.Add(-time.Hour))}},
		{query: "stream=All", want: &v1.PodLogOptions{}},
		// Windows beyond what a Duration holds, or past the epoch: the
		// whole log (it overflowed into the future, and so nothing).
		{query: "sinceSeconds=9300000000", want: &v1.PodLogOptions{}},
		{query: "sinceSeconds=9223372036854775807", want: &v1.PodLogOptions{}},
		{query: fmt.Sprint("sinceSeconds=", now.Unix()), want: &v1.PodLogOptions{}},
		{query: fmt.Sprint("sinceSeconds=", now.Unix()-1), want: &v1.PodLogOptions{SinceTime: ptrTime(time.Unix(1, 0))}},
		// Any int64 count means what it says (all of the log).
		{query: "tailLines=9223372036854775807&limitBytes=9223372036854775807",
			want: &v1.PodLogOptions{TailLines: ptr.To[int64](1<<63 - 1), LimitBytes: ptr.To[int64](1<<63 - 1)}},
		{query: "sinceSeconds=99999999999999999999", status: http.StatusBadRequest, msg: "sinceSeconds=99999999999999999999 is out of range: at most 9223372036854775807"},
		{query: "tailLines=99999999999999999999", status: http.StatusBadRequest, msg: "tailLines=99999999999999999999 is out of range"},
		{query: "limitBytes=18446744073709551616", status: http.StatusBadRequest, msg: "limitBytes=18446744073709551616 is out of range"},
		{query: "tailLines=-99999999999999999999", status: http.StatusUnprocessableEntity, msg: "tailLines must be at least 0"},
		{query: "follow=maybe", status: http.StatusBadRequest},
		{query: "tailLines=x", status: http.StatusBadRequest},
		{query: "tailLines=1e3", status: http.StatusBadRequest},
		{query: "sinceTime=yesterday", status: http.StatusBadRequest},
		{query: "stream=Stdout", status: http.StatusBadRequest},
		{query: "tailLines=-1", status: http.StatusUnprocessableEntity},
		{query: "limitBytes=0", status: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=0", status: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=5&sinceTime=2026-12-01T09:00:00Z", status: http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		require.NoError(t, err)
		got, status, err := kubeletserver.ParseLogOptions(q, now)
		if c.status != 0 {
			require.Error(t, err, c.query)
			assert.Equal(t, c.status, status, c.query)
			assert.Contains(t, err.Error(), c.msg, c.query)
			continue
		}
		require.NoError(t, err, c.query)
		if c.want.SinceTime != nil {
			require.NotNil(t, got.SinceTime, c.query)
			assert.True(t, c.want.SinceTime.Equal(got.SinceTime), "%s: %v", c.query, got.SinceTime)
			c.want.SinceTime, got.SinceTime = nil, nil
		}
		assert.Equal(t, c.want, got, c.query)
	}
}

func ptrTime(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// fakeLogs is a ContainerLogsFunc: a plain read writes "plain"; a followed
// log writes "following", then each line sent on lines, until ctx ends.
type fakeLogs struct {
	lines chan string
	mu    sync.Mutex
	calls []string // pod/container of each call
	// ended counts the followed reads that returned.
	ended chan struct{}
}

func newFakeLogs() *fakeLogs {
	return &fakeLogs{lines: make(chan string), ended: make(chan struct{}, 1000)}
}

func (f *fakeLogs) read(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, w io.Writer) error {
	f.mu.Lock()
	f.calls = append(f.calls, pod.Name+"/"+container)
	f.mu.Unlock()
	if !opts.Follow {
		_, err := io.WriteString(w, "plain\n")
		return err
	}
	defer func() { f.ended <- struct{}{} }()
	if _, err := io.WriteString(w, "following\n"); err != nil {
		return err
	}
	for {
		select {
		case l := <-f.lines:
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// follow opens a followed log and returns its status, and for a 200 the
// open body with its first line read.
func follow(t *testing.T, c *http.Client, n *node, pod string) (int, *bufio.Reader, io.Closer, string) {
	t.Helper()
	resp, err := c.Get(n.url + "/containerLogs/ns/" + pod + "/c?follow=true")
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil, nil, string(body)
	}
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "following\n", line)
	return resp.StatusCode, r, resp.Body, ""
}

func podsNamed(n int) pods {
	p := pods{}
	for i := range n {
		pod := testPod("ns", fmt.Sprintf("p%d", i), "c")
		p["ns/"+pod.Name] = pod
	}
	return p
}

// TestFollowsCannotStarvePlainLogs: 200 followed logs at once (anyone
// with pods/log could open them) get the stream cap's worth of streams
// and 429 for the rest, and a plain log read, an admin's logs --tail,
// still answers.
func TestFollowsCannotStarvePlainLogs(t *testing.T) {
	logs := newFakeLogs()
	// 200 TLS handshakes at once take seconds of CPU under -race on a
	// loaded machine: the handshake's bound (ReadHeaderTimeout) is not
	// what this test is about, so it may not cut them short.
	n := startNode(t, kubeletserver.Options{Pods: podsNamed(50).get, ContainerLogs: logs.read, ReadHeaderTimeout: 5 * time.Minute})
	c := n.admin()
	var mu sync.Mutex
	statuses := map[int]int{}
	var bodies []io.Closer
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			code, _, body, msg := follow(t, c, n, fmt.Sprintf("p%d", i%50))
			mu.Lock()
			defer mu.Unlock()
			statuses[code]++
			if body != nil {
				bodies = append(bodies, body)
			} else {
				assert.Contains(t, msg, "too many long-lived streams (followed logs, exec, attach, port-forward) on this node at once: at most 64")
			}
		})
	}
	wg.Wait()
	assert.Equal(t, map[int]int{http.StatusOK: kubeletserver.DefaultMaxStreams, http.StatusTooManyRequests: 200 - kubeletserver.DefaultMaxStreams}, statuses)

	code, body := get(t, c, n.url+"/containerLogs/ns/p0/c?tailLines=10", "")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "plain\n", body)
	for _, b := range bodies {
		b.Close()
	}
	for range bodies {
		<-logs.ended
	}
}

// TestFollowsCappedPerPod: one pod's followed logs stop at the per-pod
// cap; another pod's still open.
func TestFollowsCappedPerPod(t *testing.T) {
	logs := newFakeLogs()
	n := startNode(t, kubeletserver.Options{Pods: podsNamed(2).get, ContainerLogs: logs.read, MaxStreamsPerPod: 3})
	c := n.admin()
	var open []io.Closer
	for range 3 {
		code, _, body, msg := follow(t, c, n, "p0")
		require.Equal(t, http.StatusOK, code, msg)
		open = append(open, body)
	}
	code, _, extra, msg := follow(t, c, n, "p0")
	if extra != nil {
		open = append(open, extra)
	}
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Contains(t, msg, "to this pod at once: at most 3")
	code, _, body, msg := follow(t, c, n, "p1")
	require.Equal(t, http.StatusOK, code, msg)
	open = append(open, body)
	for _, b := range open {
		b.Close()
	}
	for range open {
		<-logs.ended
	}
}

// TestFollowIdleTimeout: a followed log that carries nothing for
// StreamIdleTimeout ends; each line written restarts the count.
func TestFollowIdleTimeout(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	logs := newFakeLogs()
	const idle = time.Minute
	n := startNode(t, kubeletserver.Options{Pods: podsNamed(1).get, ContainerLogs: logs.read, StreamIdleTimeout: idle, Clock: clk})
	code, r, body, msg := follow(t, n.admin(), n, "p0")
	require.Equal(t, http.StatusOK, code, msg)
	defer body.Close()

	clk.Step(idle / 2)
	logs.lines <- "still here"
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "still here\n", line)
	clk.Step(idle / 2) // idle for half the timeout only
	// The timer fired and, finding the stream active, is armed again for
	// the rest (from a goroutine of its own): step on once it is.
	waitForTimer(t, clk)
	logs.lines <- "and here"
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "and here\n", line)

	clk.Step(idle)
	<-logs.ended
	rest, err := io.ReadAll(r)
	assert.NoError(t, err, "the stream ends cleanly")
	assert.Empty(t, rest)
}

// waitForTimer waits until clk has a timer armed.
func waitForTimer(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !clk.HasWaiters() {
		require.True(t, time.Now().Before(deadline), "no timer armed")
		runtime.Gosched()
	}
}

// TestContainerLogsRefusals: unknown pods and containers, and container
// names that try to climb out of a log directory, are 404 before any log
// is read; bad parameters are 400 or 422.
func TestContainerLogsRefusals(t *testing.T) {
	logs := newFakeLogs()
	n := startNode(t, kubeletserver.Options{Pods: podsNamed(1).get, ContainerLogs: logs.read})
	c := n.admin()
	for path, want := range map[string]int{
		"/containerLogs/ns/nosuch/c":                             http.StatusNotFound,
		"/containerLogs/ns/p0/nosuch":                            http.StatusNotFound,
		"/containerLogs/ns/p0/..%2F..%2F..%2Fetc%2Fpasswd":       http.StatusNotFound,
		"/containerLogs/ns/p0/c%2F..%2F..%2Fetc":                 http.StatusNotFound,
		"/containerLogs/..%2Fns/p0/c":                            http.StatusNotFound,
		"/containerLogs/ns/p0/c?sinceSeconds=1e99":               http.StatusBadRequest,
		"/containerLogs/ns/p0/c?tailLines=-1":                    http.StatusUnprocessableEntity,
		"/containerLogs/ns/p0/c?limitBytes=99999999999999999999": http.StatusBadRequest,
	} {
		code, body := get(t, c, n.url+path, "")
		assert.Equal(t, want, code, "%s: %s", path, body)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	assert.Empty(t, logs.calls, "no log was read")
}
