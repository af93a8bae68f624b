//go:build linux

package sandbox_test

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// The protocol's standard streams: a stdin descriptor, a terminal opened
// in the pod, and a process entering another's view (an exec).

func TestStdinReachesTheProcess(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	spec := sh(`read line; echo "got $line"; cat`)
	spec.Capabilities = sandbox.DefaultCapabilities
	_, err = p.conn.Create(ctx, "reader", &spec, sandbox.Stdio{Stdout: outW, Stderr: outW, Stdin: inR})
	inR.Close()
	outW.Close()
	require.NoError(t, err)
	require.NoError(t, p.conn.Start(ctx, "reader"))
	_, err = inW.WriteString("hello\nrest\n")
	require.NoError(t, err)
	inW.Close()
	out, err := io.ReadAll(outR)
	require.NoError(t, err)
	assert.Equal(t, "got hello\nrest\n", string(out), "the input, then its end, reach the process")
	st, err := p.conn.Wait(ctx, "reader")
	require.NoError(t, err)
	assert.Equal(t, 0, st.Code)

	_, err = p.conn.Create(ctx, "bad", &spec, sandbox.Stdio{Stdout: outW})
	assert.ErrorContains(t, err, "needs a stdout and a stderr")
	_, err = p.conn.Create(ctx, "bad", &spec, sandbox.Stdio{TTY: true, Stdin: inR})
	assert.ErrorContains(t, err, "takes no other")
}

// A terminal is opened in the pod's own devpts: the process sees it as
// its controlling terminal under the pod's /dev/pts, owned by its user,
// of the size set on the master the agent got.
func TestATerminalOpenedInThePod(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := sh(`tty; stat -c %u "$(tty)"; stty size; [ -r /dev/tty ] && echo has-ctty; read line; echo "got $line"`)
	spec.Capabilities = sandbox.DefaultCapabilities
	spec.UID, spec.GID = 1000, 1000
	proc, err := p.conn.Create(ctx, "term", &spec, sandbox.Stdio{TTY: true})
	require.NoError(t, err)
	require.NotNil(t, proc.Terminal)
	defer proc.Terminal.Close()
	require.NoError(t, pty.SetSize(proc.Terminal, 132, 43))
	require.NoError(t, p.conn.Start(ctx, "term"))
	_, err = proc.Terminal.WriteString("typed\n")
	require.NoError(t, err)
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := pty.ReadMaster(proc.Terminal, buf)
		out.Write(buf[:n])
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	got := strings.ReplaceAll(out.String(), "\r", "")
	assert.Contains(t, got, "/dev/pts/0\n", "the pod's devpts numbers its own terminals")
	assert.Contains(t, got, "1000\n", "the terminal is its user's")
	assert.Contains(t, got, "43 132\n")
	assert.Contains(t, got, "has-ctty\n")
	assert.Contains(t, got, "got typed\n")
	st, err := p.conn.Wait(ctx, "term")
	require.NoError(t, err)
	assert.Equal(t, 0, st.Code)
}

// A process entering a container's view sees its volumes and its
// read-only root, and changes nothing of that view; a view of a process
// that does not run, or with mounts of its own, is refused.
func TestAProcessEntersAnothersView(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{
		Volumes:     []sandbox.Volume{{Name: "data", Memory: true}},
		MountPoints: []sandbox.MountPoint{{Path: "/data"}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devNull.Close()
	container := sh(`echo from-the-container > /data/f; exec sleep 100`)
	container.Capabilities = sandbox.DefaultCapabilities
	container.Mounts = []sandbox.Mount{{Volume: "data", Target: "/data"}}
	container.ReadOnlyRoot = true
	_, err = p.conn.Create(ctx, "c.0", &container, sandbox.Stdio{Stdout: devNull, Stderr: devNull})
	require.NoError(t, err)
	require.NoError(t, p.conn.Start(ctx, "c.0"))

	exec := sh(`for i in $(seq 1000); do [ -s /data/f ] && break; sleep 0.01; done; cat /data/f; echo x > /x 2>/dev/null || echo root-read-only; grep -c ' /data ' /proc/self/mountinfo`)
	exec.ViewOf = "c.0"
	out, st := p.run(exec)
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "from-the-container\n", "the container's volume")
	assert.Contains(t, out, "root-read-only\n", "the container's read-only root")
	assert.Contains(t, out, "\n1\n", "the volume is mounted once: entering the view added no mount")

	out, st = p.run(sh(`ls /data`))
	assert.Equal(t, 0, st.Code)
	assert.Empty(t, out, "a process with a view of its own does not see the container's volume")

	exec.ViewOf = "nobody"
	_, _, err = p.try(exec)
	assert.ErrorContains(t, err, `process "nobody", whose view the new process would enter, does not run`)
	exec.ViewOf = "c.0"
	exec.Mounts = container.Mounts
	_, _, err = p.try(exec)
	assert.ErrorContains(t, err, "cannot have its own")

	require.NoError(t, p.conn.Signal(ctx, "c.0", syscall.SIGKILL))
	_, err = p.conn.Wait(ctx, "c.0")
	require.NoError(t, err)
}
