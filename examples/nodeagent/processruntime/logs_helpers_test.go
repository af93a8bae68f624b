package processruntime_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// readLogs reads a container's log with opts, failing the test on error.
func readLogs(t *testing.T, rt *processruntime.Runtime, uid types.UID, container string, opts processruntime.LogOptions) string {
	t.Helper()
	var out strings.Builder
	require.NoError(t, rt.ReadLogs(context.Background(), uid, container, opts, &out))
	return out.String()
}

// waitLog waits until the current log of the container holds text.
func waitLog(t *testing.T, rt *processruntime.Runtime, uid types.UID, container, text string) {
	t.Helper()
	eventually(t, 10*time.Second, "the log of "+container+" to hold "+strconv.Quote(text), func() bool {
		var out strings.Builder
		_ = rt.ReadLogs(context.Background(), uid, container, processruntime.LogOptions{}, &out)
		return strings.Contains(out.String(), text)
	})
}

// touch creates a file in the pod's scratch directory: a step a container
// script waits for with `until [ -e name ]`.
func touch(t *testing.T, rt *processruntime.Runtime, uid types.UID, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(rt.PodDir(uid), "scratch", name), nil, 0o644))
}

// waitFor is a shell loop waiting for a file touch creates.
func waitFor(name string) string { return "until [ -e " + name + " ]; do sleep 0.01; done" }

// logShims returns the PIDs of the log shims whose log directory is under
// dir, from their command lines.
func logShims(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[0] == "podkit-log-shim" && strings.HasPrefix(args[1], dir+string(filepath.Separator)) {
			if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !zombieStat(string(stat)) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func zombieStat(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// dirBytes sums the sizes of the log files in dir, and counts them.
func dirBytes(t *testing.T, dir string) (total int64, files int) {
	t.Helper()
	for _, f := range logFiles(t, dir) {
		total += f.size
		files++
	}
	return total, files
}

func ptr[T any](v T) *T { return &v }

type logFile struct {
	name string
	size int64
}

// logFiles lists the log files (chunks) in dir.
func logFiles(t *testing.T, dir string) []logFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []logFile
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			out = append(out, logFile{e.Name(), fi.Size()})
		}
	}
	return out
}

// readFile reads dir/name.
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return string(data)
}
