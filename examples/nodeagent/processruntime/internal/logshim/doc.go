// Package logshim is the log shim of the process runtime: a small process
// per container instance that holds the read ends of the container's
// stdout and stderr pipes and writes what arrives, line by line, to
// rotated files in the CRI log format. It is the agent's own executable
// run again (/proc/self/exe) with MarkerEnv set: the package's init runs
// the shim instead of the program, so any binary that links the process
// runtime (an agent, a test binary) can start it, and it needs no other
// file on the node. A program linking only the stage packages
// (processruntime's cmd/podkit-stages, Options.StageExecutable) starts it
// at less cost.
//
// The shim lets a container outlive its agent: the pipes stay drained
// while no agent runs (no SIGPIPE, no writer blocked on a full pipe), and
// nothing is lost across an agent restart. It ends at end of file, once
// the container and every process holding its stdout or stderr are gone,
// after writing everything it read.
//
// # Stdin, terminals and attach
//
// A container with stdin: true has its stdin held by its shim too, and
// one with tty: true its terminal (Mode): a pseudo-terminal that is the
// container's stdin, stdout, stderr and controlling terminal, whose master
// the shim holds, so both survive an agent restart as the output does.
// With a terminal the output is one stream, logged as stdout.
//
// The shim serves attach sessions (Attach, kubectl attach) on a unix
// socket in the container's log directory, <instance>.attach: several
// sessions share the output (each read of it once it is in the log, so a
// read of the log after a session saw some output has it too), their
// input goes to the container's stdin
// (closed after the first session with stdinOnce), and a session's
// terminal size is the container's terminal's. The framing (hello, input,
// close, resize; welcome, stdout, stderr, end) is written out in
// attach_protocol.go. What bounds a session: maxClients at once,
// maxClientQueue bytes of output waiting for one (a session further
// behind is ended, never the container held up), clientWriteTimeout per
// write to it; a session's input waits while the container does not read
// its stdin (its pipe is full), as a writer to any pipe waits.
//
// # Files
//
// All instances of one container share one directory:
//
//	<instance>.<seq>.log   a chunk of instance <instance>'s log, seq 0, 1, ...
//	<instance>.lock        locked (flock) while the instance's shim runs,
//	                       released when it exits; holds "<pid> <start
//	                       ticks>" of the shim
//	<instance>.attach      the shim's attach socket while it runs
//
// A chunk never exceeds the maximum size; when the next record would not
// fit, the shim starts the next chunk, then deletes the oldest chunks of
// the directory (of any instance) beyond the maximum count, and every
// chunk of instances older than the previous one. Chunks are never
// renamed, so a reader that follows the log moves from chunk seq to the
// next one it finds.
//
// Each record is one line:
//
//	<RFC 3339 time, nanoseconds, UTC> <stdout|stderr> <F|P> <text>\n
//
// F ends a line; P is part of a line continued by the stream's next
// record: a line longer than the record limit is split, and text a stream
// ended without a newline is a final P record. The time is when the shim
// read the text.
package logshim
