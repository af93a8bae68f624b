package main

import (
	"bufio"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

func TestParseLogQuery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	good := []struct {
		query string
		want  processruntime.LogOptions
	}{
		{"", processruntime.LogOptions{}},
		{"follow=true&previous=1&timestamps=false", processruntime.LogOptions{Follow: true, Previous: true}},
		{"tailLines=0", processruntime.LogOptions{TailLines: ptr[int64](0)}},
		{"tailLines=9223372036854775807&limitBytes=9223372036854775807", processruntime.LogOptions{TailLines: ptr[int64](math.MaxInt64), LimitBytes: ptr[int64](math.MaxInt64)}},
		{"sinceSeconds=60", processruntime.LogOptions{SinceTime: ptr(now.Add(-time.Minute))}},
		{"sinceSeconds=9223372036854775807", processruntime.LogOptions{}},
		{"sinceTime=2026-12-01T07:30:00.5Z", processruntime.LogOptions{SinceTime: ptr(time.Date(2026, 12, 1, 7, 30, 0, 5e8, time.UTC))}},
	}
	for _, tc := range good {
		q, err := url.ParseQuery(tc.query)
		require.NoError(t, err)
		got, err := parseLogQuery(q, now)
		require.NoError(t, err, tc.query)
		assert.Equal(t, tc.want, got, tc.query)
	}
	bad := []struct{ query, want string }{
		{"tail=5", `unknown parameter "tail" (want follow, previous, timestamps, tailLines, sinceSeconds, sinceTime, limitBytes)`},
		{"follow=yes", `follow="yes": want true or false`},
		{"follow", `follow="": want true or false`},
		{"previous=2", `previous="2": want true or false`},
		{"tailLines=-1", `tailLines="-1": want a number of lines, 0 or more`},
		{"tailLines=ten", `tailLines="ten": want a number of lines`},
		{"tailLines=99999999999999999999", `tailLines="99999999999999999999"`},
		{"limitBytes=0", `limitBytes="0": want a number of bytes, 1 or more`},
		{"sinceSeconds=0", `sinceSeconds="0": want a number of seconds, 1 or more`},
		{"sinceTime=yesterday", `sinceTime="yesterday": want an RFC 3339 time`},
		{"sinceSeconds=5&sinceTime=2026-12-01T07:30:00Z", "give at most one of sinceSeconds and sinceTime"},
		{"tailLines=1&tailLines=2", "parameter tailLines is given 2 times"},
	}
	for _, tc := range bad {
		q, err := url.ParseQuery(tc.query)
		require.NoError(t, err)
		_, err = parseLogQuery(q, now)
		require.Error(t, err, tc.query)
		assert.Contains(t, err.Error(), tc.want, tc.query)
	}
}

func TestLogCapFlags(t *testing.T) {
	t.Parallel()
	opts, err := parseFlags([]string{"--manifests", t.TempDir(), "--container-log-max-size", "2Mi", "--container-log-max-files", "3"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, int64(2<<20), opts.containerLogMaxSize)
	assert.Equal(t, 3, opts.containerLogMaxFiles)
	opts, err = parseFlags([]string{"--manifests", t.TempDir()}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, int64(processruntime.DefaultContainerLogMaxSize), opts.containerLogMaxSize, "the kubelet's 10Mi")
	assert.Equal(t, processruntime.DefaultContainerLogMaxFiles, opts.containerLogMaxFiles, "the kubelet's 5")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--container-log-max-size", "100"}, "--container-log-max-size must be at least 1024 bytes, got 100"},
		{[]string{"--container-log-max-size", "ten"}, `invalid value "ten" for flag -container-log-max-size: want a quantity such as 10Mi`},
		{[]string{"--container-log-max-size", "1.5"}, "want a whole, non-negative number of bytes"},
		{[]string{"--container-log-max-size", "-1Mi"}, "want a whole, non-negative number of bytes"},
		{[]string{"--container-log-max-files", "1"}, "--container-log-max-files must be at least 2, got 1"},
	} {
		var stderr strings.Builder
		_, err := parseFlags(append([]string{"--manifests", t.TempDir()}, tc.args...), &stderr)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error()+stderr.String(), tc.want, "%v", tc.args)
	}
}

func TestLogsEndpoint(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	writeManifest(t, opts.manifests, "talker", `apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: example.com/talker, command: [sh, -c, "echo one; until [ -e go ]; do sleep 0.01; done; echo two"]}
`)
	a, out, stop, wait := startAgent(t, opts)
	defer func() {
		stop()
		require.NoError(t, wait(), "output:\n%s", out.String())
	}()
	uid := uidOfEventually(t, a, "default/talker-test-node")
	waitFor(t, a, "the first line", func() bool { return logContains(a.rt, uid, "main", "one\n") })

	// A server write timeout far shorter than a follow: each write of a
	// log response has its own deadline.
	srv := httptest.NewUnstartedServer(a.endpoint().httpHandler())
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	base := "/pods/" + string(uid) + "/logs/main"
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{base, http.StatusOK, "one\n"},
		{base + "?limitBytes=2", http.StatusOK, "on"},
		{base + "?tailLines=0", http.StatusOK, ""},
		{base + "?sinceSeconds=3600", http.StatusOK, "one\n"},
		{base + "?sinceTime=2999-01-01T00:00:00Z", http.StatusOK, ""},
		{base + "?tailLines=-1", http.StatusBadRequest, `nodeagent: tailLines="-1": want a number of lines, 0 or more`},
		{base + "?limitBytes=0", http.StatusBadRequest, `nodeagent: limitBytes="0"`},
		{base + "?bogus=1", http.StatusBadRequest, `nodeagent: unknown parameter "bogus"`},
		{base + "?follow=maybe", http.StatusBadRequest, `nodeagent: follow="maybe": want true or false`},
		{base + "?previous=true", http.StatusNotFound, `has no previous instance: it has not restarted`},
		{"/pods/" + string(uid) + "/logs/other", http.StatusNotFound, `no container "other" in pod default/talker-test-node`},
		{"/pods/" + string(uid) + "/logs/..%2Fmain", http.StatusNotFound, `"../main" is not a container name`},
		{"/pods/no-such-pod/logs/main", http.StatusNotFound, "no pod no-such-pod on this node"},
		{"/pods/..%2F..%2Fetc/logs/main", http.StatusNotFound, "cannot name a directory"},
	} {
		code, body := get(tc.path)
		assert.Equal(t, tc.code, code, "%s: %s", tc.path, body)
		if tc.code == http.StatusOK {
			assert.Equal(t, tc.want, body, tc.path)
		} else {
			assert.Contains(t, body, tc.want, tc.path)
		}
	}
	code, body := get(base + "?timestamps=true")
	require.Equal(t, http.StatusOK, code)
	ts, text, _ := strings.Cut(body, " ")
	_, err := time.Parse(time.RFC3339Nano, ts)
	assert.NoError(t, err, "a timestamp starts %q", body)
	assert.Equal(t, "one\n", text)

	// Log responses at once are bounded.
	mux := http.NewServeMux()
	mux.Handle("GET /pods/{uid}/logs/{container}", a.endpoint().logsHandler(2))
	limited := httptest.NewServer(mux)
	defer limited.Close()
	ctx, cancel := context.WithCancel(context.Background())
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, limited.URL+base+"?follow=true", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	resp, err := http.Get(limited.URL + base)
	require.NoError(t, err)
	body, _ = readAll(resp)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "nodeagent: 2 log requests are being served already; try again later\n", body)
	cancel()
	waitFor(t, a, "the follows to end with their clients", func() bool {
		resp, err := http.Get(limited.URL + base)
		if err != nil {
			return false
		}
		_, _ = readAll(resp)
		return resp.StatusCode == http.StatusOK
	})

	// A follow streams each line as it comes, and ends with the container.
	// (A response that did not flush would time out, not hang the test.)
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err = client.Get(srv.URL + base + "?follow=true")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	lines := bufio.NewReader(resp.Body)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "one\n", line, "the first line arrives while the container runs")
	// The container is silent for longer than the server's write timeout.
	time.Sleep(2 * srv.Config.WriteTimeout)
	require.NoError(t, os.WriteFile(filepath.Join(a.rt.PodDir(uid), "scratch", "go"), nil, 0o644))
	line, err = lines.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "two\n", line)
	rest, err := io.ReadAll(lines)
	require.NoError(t, err, "the response ends once the container has")
	assert.Empty(t, rest)
}

// readAll reads and closes a response's body.
func readAll(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// uidOfEventually waits until the agent knows the pod named name and
// returns its UID.
func uidOfEventually(t *testing.T, a *agent, name string) types.UID {
	t.Helper()
	var uid types.UID
	waitFor(t, a, "pod "+name, func() bool {
		a.records.mu.Lock()
		defer a.records.mu.Unlock()
		for u, rec := range a.records.pods {
			if rec.name == name {
				uid = u
				return true
			}
		}
		return false
	})
	return uid
}

func ptr[T any](v T) *T { return &v }
