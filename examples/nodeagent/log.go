package main

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// newLogger logs to w. Errors are always logged; verbosity 1 adds the
// V(0) information, 2 adds V(1), and so on. The engine's report of a
// container in restart backoff is the crash loop working as intended (the
// agent prints container exits), so it is logged as V(1) information
// rather than as an error.
func newLogger(w io.Writer, verbosity int) logr.Logger {
	var mu sync.Mutex
	sink := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if prefix != "" {
			fmt.Fprintf(w, "%s: %s\n", prefix, args)
		} else {
			fmt.Fprintln(w, args)
		}
	}, funcr.Options{Verbosity: verbosity - 1}).GetSink()
	return logr.New(quietSink{sink})
}

// quietSink demotes backoff errors to V(1) information.
type quietSink struct{ logr.LogSink }

func (s quietSink) Error(err error, msg string, kv ...any) {
	if errors.Is(err, processruntime.ErrBackOff) {
		if s.LogSink.Enabled(1) {
			s.LogSink.Info(1, msg, append(kv, "err", err.Error())...)
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s quietSink) WithValues(kv ...any) logr.LogSink { return quietSink{s.LogSink.WithValues(kv...)} }
func (s quietSink) WithName(name string) logr.LogSink { return quietSink{s.LogSink.WithName(name)} }
