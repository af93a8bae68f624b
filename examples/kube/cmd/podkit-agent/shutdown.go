package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/lifecycle/nodeshutdown"
)

// The explicit node shutdown of podkit-agent: SIGUSR1, or
// `podkit-agent shutdown` through the agent's shutdown socket, makes the
// agent shut its node down as a kubelet's graceful node shutdown does
// (agent.Agent.ShutdownNode within the budget of --shutdown-grace-period),
// then exit. SIGTERM and SIGINT keep their meaning: the agent exits and
// its pods keep running for the next agent.

// shutdownSocketName, in the state directory, is the agent's shutdown
// socket: a unix socket of mode 0600, in a directory of the agent's only,
// taking connections from root and the agent's own user only.
const shutdownSocketName = "shutdown.sock"

// shutdownRequest is what `podkit-agent shutdown` writes on the socket.
const shutdownRequest = "shutdown\n"

// maxRequest bounds what the agent reads from a connection to its shutdown
// socket, and requestTimeout how long it waits for it.
const (
	maxRequest     = 64
	requestTimeout = 5 * time.Second
)

// nodeAgent is what the shutdown needs of the agent.
type nodeAgent interface {
	ShutdownNode(context.Context, nodeshutdown.Budget) (nodeshutdown.Report, error)
	SourcesReady() bool
	Client() kubernetes.Interface
}

// sourcesPoll is how often a shutdown requested early looks whether the
// agent knows its pods yet.
const sourcesPoll = 50 * time.Millisecond

// listenShutdown opens the agent's shutdown socket in stateDir, replacing
// one a dead agent left (the state directory is locked by the running
// agent's runtime, so no other agent uses it).
func listenShutdown(stateDir string) (*net.UnixListener, error) {
	path := filepath.Join(stateDir, shutdownSocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	old := syscall.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("the shutdown socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// serveShutdown answers requests on l until ctx ends: a request from root
// or the agent's user runs shutdown once (later ones wait for its report),
// writes its report back, and calls done. Other peers are told no.
func serveShutdown(ctx context.Context, l *net.UnixListener, budget nodeshutdown.Budget, a nodeAgent, done func(), log logr.Logger) {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return // closed
		}
		go func() {
			defer c.Close()
			if err := allowedPeer(c); err != nil {
				fmt.Fprintf(c, "refused: %v\n", err)
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
			line, err := bufio.NewReader(io.LimitReader(c, maxRequest)).ReadString('\n')
			if err != nil || line != shutdownRequest {
				fmt.Fprintf(c, "refused: want %q\n", strings.TrimSpace(shutdownRequest))
				return
			}
			log.Info("Node shutdown requested on the shutdown socket", "gracePeriod", budget.GracePeriod)
			report, err := runShutdown(ctx, budget, a)
			writeReport(c, report, err)
			done()
		}()
	}
}

// allowedPeer lets in root and the agent's own user.
func allowedPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var uid int
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		uid, credErr = peerUID(int(fd))
	}); err != nil {
		return err
	}
	if credErr != nil {
		return credErr
	}
	if uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("user %d may not shut this node down", uid)
	}
	return nil
}

// runShutdown shuts the node down within budget, bounded by the budget
// and a margin for the kills' hand-over. Asked just after the agent
// started, it first waits (within the bound) until the agent knows its
// pods, so none is left running.
func runShutdown(ctx context.Context, budget nodeshutdown.Budget, a nodeAgent) (nodeshutdown.Report, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget.GracePeriod+5*time.Second)
	defer cancel()
	tick := time.NewTicker(sourcesPoll)
	defer tick.Stop()
	for !a.SourcesReady() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nodeshutdown.Report{}, fmt.Errorf("the agent did not learn its pods before the shutdown's deadline: %w", ctx.Err())
		}
	}
	report, err := a.ShutdownNode(ctx, budget)
	settle(ctx, a.Client(), report)
	return report, err
}

// statusSettle bounds how long an explicit shutdown waits, before the
// agent exits, for the final statuses of the pods it stopped to reach the
// API server (the status writer writes them from its own loop, which ends
// with the agent; a kubelet's goes on until the machine is off).
const statusSettle = 10 * time.Second

// settle waits until the API server shows each pod of report.Terminated in
// a terminal phase, or gone, for at most statusSettle.
func settle(ctx context.Context, client kubernetes.Interface, report nodeshutdown.Report) {
	ctx, cancel := context.WithTimeout(ctx, statusSettle)
	defer cancel()
	for _, p := range report.Terminated {
		name, ns, ok := strings.Cut(p.FullName, "_")
		if !ok {
			continue
		}
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return true, nil
			case err != nil:
				return false, nil
			}
			return pod.UID != p.UID || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed, nil
		})
	}
}

func writeReport(w io.Writer, r nodeshutdown.Report, err error) {
	fmt.Fprintf(w, "%d pods stopped, %d still stopping\n", len(r.Terminated), len(r.NotTerminated))
	for _, p := range r.NotTerminated {
		fmt.Fprintf(w, "still stopping: %s\n", p.FullName)
	}
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
	} else {
		fmt.Fprintln(w, "ok")
	}
}

// requestShutdown is `podkit-agent shutdown`: it asks the agent of
// stateDir to shut its node down and copies the agent's report to out,
// within timeout. It fails when the report does not end in "ok".
func requestShutdown(stateDir string, timeout time.Duration, out io.Writer) error {
	c, err := net.DialTimeout("unix", filepath.Join(stateDir, shutdownSocketName), 5*time.Second)
	if err != nil {
		return fmt.Errorf("reaching the agent of %s: %w", stateDir, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, shutdownRequest); err != nil {
		return err
	}
	var last string
	sc := bufio.NewScanner(io.LimitReader(c, 1<<20))
	for sc.Scan() {
		last = sc.Text()
		fmt.Fprintln(out, last)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the agent's report: %w", err)
	}
	if last != "ok" {
		return errors.New("the node did not shut down cleanly")
	}
	return nil
}
