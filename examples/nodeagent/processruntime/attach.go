package processruntime

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// Attach connects s to the running main process of container of pod uid
// (kubectl attach, run -it, debug -it), through the log shim of its
// current instance, which holds its output, its stdin (stdin: true) and
// its terminal (tty: true): several sessions may be attached at once, and
// one survives nothing of the agent but the session. s gets the output
// from now on (kubectl logs has what came before); s.Stdin reaches the
// container when it has stdin (a container without gets output only, as
// on a kubelet), and its end ends the session, except with stdinOnce and
// no terminal, where it closes the container's stdin instead and the
// output goes on; with stdinOnce, the container's stdin closes when the
// first session with input ends. s.Resize resizes a container's
// terminal. s.TTY is not used: whether the container has a terminal is
// its spec's.
//
// It returns nil when the process exits, ctx ends, or the client's input
// ends the session; leaving never stops the process. The error says the
// container is unknown (ErrNotFound) or not running (ErrNotRunning), that
// its shim serves no session (it was started by an agent without attach),
// or that the shim ended the session (the client fell too far behind the
// output). Called from any goroutine, concurrently for any sessions.
func (r *Runtime) Attach(ctx context.Context, uid types.UID, container string, s Streams) error {
	if r.closed() {
		return ErrClosed
	}
	rc, err := r.findRunning(uid, container)
	if err != nil {
		return fmt.Errorf("processruntime: attach: %w", err)
	}
	sh := rc.proc.shim
	if sh == nil {
		return fmt.Errorf("processruntime: attach: container %q of pod %s/%s has no log shim", container, rc.p.namespace, rc.p.name)
	}
	ls := logshim.AttachStreams{Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr}
	if rc.spec != nil && !rc.spec.Stdin {
		ls.Stdin = nil
	}
	// (Deferred in this order: cancel ends the goroutines, then they are
	// waited for.)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		select {
		case <-rc.proc.done:
			cancel()
		case <-ctx.Done():
		}
	})
	if s.Resize != nil {
		sizes := make(chan logshim.TerminalSize)
		ls.Resize = sizes
		wg.Go(func() {
			defer close(sizes)
			for {
				select {
				case size, ok := <-s.Resize:
					if !ok {
						return
					}
					select {
					case sizes <- logshim.TerminalSize{Width: size.Width, Height: size.Height}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		})
	}
	if err := logshim.Attach(ctx, sh.dir, sh.instance, ls, nil); err != nil && ctx.Err() == nil {
		return fmt.Errorf("processruntime: attach to container %q of pod %s/%s: %w", container, rc.p.namespace, rc.p.name, err)
	}
	return nil
}
