package processruntime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// stdinPod is a pod whose container "c" answers each line of its stdin.
func stdinPod(once, tty bool) *v1.Pod {
	pod := newPod(v1.RestartPolicyNever, "c", `while read line; do echo "echo: $line"; done; echo stdin-closed; exec sleep 1000`)
	c := &pod.Spec.Containers[0]
	c.Stdin, c.StdinOnce, c.TTY = true, once, tty
	return pod
}

// A container with stdin: true keeps it open across attach sessions: each
// session types into it and reads its answers, and the end of a session's
// input ends that session only. Its output is logged as usual.
func TestAttachToAContainersStdin(t *testing.T) {
	t.Parallel()
	for _, sb := range []bool{false, true} {
		t.Run(map[bool]string{false: "Host", true: "Sandbox"}[sb], func(t *testing.T) {
			t.Parallel()
			var rt *processruntime.Runtime
			if sb {
				rt = sandboxed(t, processruntime.Options{})
			} else {
				rt = openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff})
			}
			pod := stdinPod(false, false)
			waitRunning(t, rt, pod, "c")
			t.Cleanup(func() { terminate(t, rt, pod, 1) })

			a := startAttach(t, rt, pod.UID, "c", true, false)
			a.typeIn(t, "one\n")
			a.out.waitFor(t, "echo: one\n")
			require.NoError(t, a.stdin.Close())
			require.NoError(t, a.wait(t).err, "the end of the client's input ends its session")

			b := startAttach(t, rt, pod.UID, "c", true, false)
			b.typeIn(t, "two\n")
			b.out.waitFor(t, "echo: two\n")
			assert.NotContains(t, b.out.String(), "one", "a session gets the output from its start on")
			b.cancel()
			require.NoError(t, b.wait(t).err)
			c, _ := status(t, rt, pod.UID).Container("c")
			assert.Equal(t, processruntime.ContainerStateRunning, c.State, "leaving never stops the container")
			logs := readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{})
			assert.Equal(t, "echo: one\necho: two\n", logs)
		})
	}
}

// With stdinOnce, the container's stdin closes once the first session
// with input has ended; that session goes on with the output (no
// terminal), and the session ends when the container exits.
func TestAttachWithStdinOnce(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := stdinPod(true, false)
	pod.Spec.Containers[0].Command = []string{"sh", "-c", `while read line; do echo "echo: $line"; done; echo stdin-closed`}
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })

	a := startAttach(t, rt, pod.UID, "c", true, false)
	a.typeIn(t, "only\n")
	a.out.waitFor(t, "echo: only\n")
	require.NoError(t, a.stdin.Close())
	a.out.waitFor(t, "stdin-closed\n")
	require.NoError(t, a.wait(t).err, "the container's exit ends the session")
}

// A container with a terminal is attached to as a terminal: the
// session's size is the terminal's, its input is typed into it (and
// echoed), and its output is one stream; it survives an agent restart
// with its shim.
func TestAttachToAContainersTerminal(t *testing.T) {
	t.Parallel()
	stateDir := sandboxStateDir(t)
	first := sandboxed(t, processruntime.Options{StateDir: stateDir})
	pod := newPod(v1.RestartPolicyNever, "c", `while read line; do echo "got $line at $(stty size)"; done`)
	c := &pod.Spec.Containers[0]
	c.Stdin, c.TTY = true, true
	waitRunning(t, first, pod, "c")
	require.NoError(t, first.Close())

	rt := openRuntime(t, processruntime.Options{StateDir: stateDir})
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	a := startAttach(t, rt, pod.UID, "c", true, true)
	a.resize <- processruntime.TerminalSize{Width: 90, Height: 20}
	// The size goes to the terminal beside the input, not before it (as
	// kubectl's resize stream does): a line typed before it arrives reads
	// the old size, so type until a line reads the new one.
	for n := 1; !strings.Contains(a.out.String(), "got hi at 20 90"); n++ {
		require.Less(t, n, 100, "the terminal's size never became the session's: %q", a.out.String())
		a.typeIn(t, "hi\r")
		a.out.waitForN(t, "got hi at", n)
	}
	assert.Contains(t, strings.ReplaceAll(a.out.String(), "\r", ""), "hi\n", "the terminal echoes")
	a.cancel()
	require.NoError(t, a.wait(t).err)
	// The shim logs each read of the output before the sessions get it.
	assert.Contains(t, readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{}), "got hi at 20 90", "a terminal's output is logged")
}

// A container without stdin gives an attach session its output only:
// the client's input is not even read.
func TestAttachWithoutStdinGivesOutputOnly(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyNever, "c", `while :; do echo tick; sleep 0.05; done`)
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	a := startAttach(t, rt, pod.UID, "c", true, false)
	written := make(chan struct{})
	go func() {
		_, _ = a.stdin.Write([]byte("ignored\n"))
		close(written)
	}()
	a.out.waitFor(t, "tick\n")
	a.cancel()
	require.NoError(t, a.wait(t).err)
	select {
	case <-written:
		t.Fatal("the session read the client's input")
	default:
	}
	a.stdin.Close()
}
