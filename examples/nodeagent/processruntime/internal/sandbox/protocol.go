//go:build linux

package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// The control protocol between the agent and a sandbox's init, over the
// unix stream socket the agent created for the pod (the init holds its
// listening end). Each message is a frame: a 4-byte big-endian length,
// then that many bytes of JSON (a message). File descriptors travel with
// the frame (SCM_RIGHTS): the kernel delivers them with its first byte.
//
// The agent sends requests, each with a Seq of its own, and the init
// answers each with a "reply" of the same Seq, in order:
//
//	create  Name, Spec, TTY; fds: stdout, stderr[, stdin] (none with TTY)
//	                                          -> reply PID (in the pod), fds: pidfd[, terminal master]
//	start   Name                              -> reply (the command was executed, or Error)
//	signal  Name, Signal                      -> reply (sent to the process group, unless it ended)
//	list                                      -> reply Procs; fds: a pidfd per running one
//	forget  Name                              -> reply (an exited process is dropped)
//
// create runs the container stage up to the execve of the command, and
// stops there: between create and start the agent learns the process's
// host PID (from the pidfd) and records it, and may move it into a cgroup,
// before the command runs. Its stdin is the third descriptor when sent,
// else /dev/null. With TTY, the init opens a pseudo-terminal in the pod's
// own devpts (/dev/ptmx of the pod's root): its slave is the process's
// stdin, stdout, stderr and controlling terminal, owned by the process's
// user, and its master goes back with the reply, the agent's to hold.
// With Spec.ViewOf, the process enters the mount namespace of that
// running process of the init's (an exec into a container, an ephemeral
// container aimed at one) instead of building a view of its own.
//
// A process is a container's or an exec's alike for the init: it reaps
// each, kills what is left of its process group when it ends, lists it,
// and, as every process of the pod's PID namespace, it ends with the
// init. The init sends, unasked and with Seq 0, an
// "exited" message (Name, Exit) when a started process ends: after it
// killed what was left in the process's group, and after reaping it. A
// process stays listed, exited, until it is forgotten, so an agent that
// was not connected when it ended still learns its exit code.
//
// One connection is served at a time: a new one replaces the old (an
// agent restarted while the old connection was still open).
//
// The same frames carry a runtime's requests to its spawner (Spawner),
// over the socket pair it starts the spawner with:
//
//	spawn   Sandbox; fds: the control socket (listening), the sandbox's
//	        log[, the network namespace to join]
//	                                          -> init PID (as soon as the init runs)
//	                                          -> reply PID (the init is ready), or Error
//
// The init's PID comes first, and with it the init is the runtime's
// child (CLONE_PARENT): should the setup fail after, or the runtime stop
// waiting, the runtime kills and reaps it.

const (
	// maxFrame caps a message. A process's arguments and environment
	// cannot exceed a few megabytes in Linux either.
	maxFrame = 4 << 20
	// maxFDs caps the descriptors sent with one message.
	maxFDs = 64
)

// message is one frame's JSON.
type message struct {
	Seq    uint64         `json:"seq,omitempty"`
	Op     string         `json:"op"`
	Name   string         `json:"name,omitempty"`
	Spec   *ProcessSpec   `json:"spec,omitempty"`
	Signal int            `json:"signal,omitempty"`
	TTY    bool           `json:"tty,omitempty"`
	Error  string         `json:"error,omitempty"`
	PID    int            `json:"pid,omitempty"`
	Exit   *ExitStatus    `json:"exit,omitempty"`
	Procs  []ProcessState `json:"procs,omitempty"`
	// Sandbox is a spawn's request.
	Sandbox *spawnRequest `json:"sandbox,omitempty"`
}

// spawnRequest is what a spawner needs to set up one pod's sandbox
// besides its descriptors: Launch's fields that travel.
type spawnRequest struct {
	Config     Config   `json:"config"`
	Env        []string `json:"env,omitempty"`
	Cgroup     string   `json:"cgroup,omitempty"`
	JoinTasks  []string `json:"joinTasks,omitempty"`
	LeaveTasks []string `json:"leaveTasks,omitempty"`
}

// The operations.
const (
	opCreate = "create"
	opStart  = "start"
	opSignal = "signal"
	opList   = "list"
	opForget = "forget"
	opReply  = "reply"
	opExited = "exited"
	opSpawn  = "spawn"
	opInit   = "init"
)

// exitStatus converts a wait status.
func exitStatus(ws syscall.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}

// writeFrame sends m, with fds.
func writeFrame(c *net.UnixConn, m *message, fds []int) error {
	if len(fds) > maxFDs {
		return fmt.Errorf("sandbox: %d descriptors in one message, more than %d", len(fds), maxFDs)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("sandbox: encoding a message: %w", err)
	}
	if len(body) > maxFrame {
		return fmt.Errorf("sandbox: a %d-byte message exceeds %d bytes", len(body), maxFrame)
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(buf, oob, nil)
	if err != nil {
		return err
	}
	// A stream socket may take part of a large frame at once: the rest
	// follows without descriptors.
	if n < len(buf) {
		_, err = c.Write(buf[n:])
	}
	return err
}

// readFrame receives a message and the descriptors sent with it, which
// the caller owns.
func readFrame(c *net.UnixConn) (*message, []*os.File, error) {
	hdr := make([]byte, 4)
	oob := make([]byte, syscall.CmsgSpace(maxFDs*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(hdr, oob)
	files, ferr := parseRights(oob[:oobn])
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if err != nil {
		closeAll()
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, nil, io.EOF
		}
		return nil, nil, err
	}
	if n == 0 {
		closeAll()
		return nil, nil, io.EOF
	}
	if ferr != nil || flags&syscall.MSG_CTRUNC != 0 {
		closeAll()
		return nil, nil, errors.New("sandbox: a message's descriptors were cut short")
	}
	if _, err := io.ReadFull(c, hdr[n:]); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("sandbox: a message ends early: %w", err)
	}
	size := binary.BigEndian.Uint32(hdr)
	if size > maxFrame {
		closeAll()
		return nil, nil, fmt.Errorf("sandbox: a %d-byte message exceeds %d bytes", size, maxFrame)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("sandbox: a message ends early: %w", err)
	}
	m := new(message)
	if err := json.Unmarshal(body, m); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("sandbox: decoding a message: %w", err)
	}
	return m, files, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files, nil
}
