package simcloud

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"k8s.io/apimachinery/pkg/types"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
)

// Logs returns what the container wrote (its start and stop lines, what
// attached clients fed it), as much as the cloud keeps (MaxLogBytes), as
// opts ask: the lines since SinceTime or SinceSeconds, the last Tail of
// them, each prefixed with its time (RFC 3339) with Timestamps, cut at
// LimitBytes; with Follow it goes on with new lines until ctx ends or the
// container stops. Previous is refused: the cloud keeps one log per
// container, across its restarts.
func (c *Cloud) Logs(ctx context.Context, uid types.UID, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	if opts.Previous {
		return nil, errors.New("simcloud: no log of a previous run: the cloud keeps one log per container, across restarts")
	}
	var (
		o     *output
		lines []logLine
		seen  int
	)
	_, err := c.open(ctx, OpLogs, uid, container, true, func(cp *cloudPod) error {
		o = cp.output(container)
		lines, seen = o.since(0)
		return nil
	})
	if err != nil {
		return nil, err
	}
	since := opts.SinceTime
	if opts.SinceSeconds > 0 {
		since = c.clock.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	kept := lines[:0]
	for _, l := range lines {
		if since.IsZero() || !l.at.Before(since) {
			kept = append(kept, l)
		}
	}
	if opts.Tail > 0 && len(kept) > opts.Tail {
		kept = kept[len(kept)-opts.Tail:]
	}
	var buf bytes.Buffer
	for _, l := range kept {
		writeLine(&buf, l, opts.Timestamps)
	}
	if opts.LimitBytes > 0 && buf.Len() > opts.LimitBytes {
		buf.Truncate(opts.LimitBytes)
	}
	if !opts.Follow || (opts.LimitBytes > 0 && buf.Len() >= opts.LimitBytes) {
		return io.NopCloser(&buf), nil
	}
	r, w := io.Pipe()
	go c.follow(ctx, uid, container, o, seen, &buf, w, opts)
	return r, nil
}

func writeLine(buf *bytes.Buffer, l logLine, timestamps bool) {
	if timestamps {
		buf.WriteString(l.at.UTC().Format(time.RFC3339Nano))
		buf.WriteByte(' ')
	}
	buf.Write(l.text)
}

// follow writes first, then the container's new lines to w until ctx
// ends, the reader is closed, the limit is reached, or the container stops.
func (c *Cloud) follow(ctx context.Context, uid types.UID, container string, o *output, seen int, first *bytes.Buffer, w *io.PipeWriter, opts api.ContainerLogOpts) {
	written := first.Len()
	if _, err := w.Write(first.Bytes()); err != nil {
		w.CloseWithError(err)
		return
	}
	for {
		c.mu.Lock()
		lines, n := o.since(seen)
		seen = n
		changed := o.changed
		cp := c.pods[uid]
		running := cp != nil && cp.remoteContainer(container) != nil && cp.remoteContainer(container).State != vk.ContainerExited
		c.mu.Unlock()
		var buf bytes.Buffer
		for _, l := range lines {
			writeLine(&buf, l, opts.Timestamps)
		}
		if opts.LimitBytes > 0 && written+buf.Len() > opts.LimitBytes {
			buf.Truncate(opts.LimitBytes - written)
			running = false
		}
		written += buf.Len()
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if !running {
			w.Close()
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			w.CloseWithError(ctx.Err())
			return
		}
	}
}
