package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// console is where an agent prints its timeline: one whole line per event,
// stamped with the time since the agent started. The stamps never go
// back: events reach the console from several goroutines (the engine's
// transitions, the runtime's container events), so one that happened
// earlier can arrive after one that happened later; it is then stamped
// with the time of the line printed before it. Both runtimes' agents
// print through one.
type console struct {
	out   io.Writer
	start time.Time
	// outMu keeps output lines whole and guards last.
	outMu sync.Mutex
	// last is the time of the latest line printed.
	last time.Time
}

func newConsole(out io.Writer) *console { return &console{out: out, start: time.Now()} }

// lineAt prints one line about pod (empty: the agent), stamped with the
// time since the agent started at t, when it happened (or at the latest
// line's time, if that is later).
func (c *console) lineAt(t time.Time, pod, msg string) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if t.Before(c.last) {
		t = c.last
	}
	c.last = t
	elapsed := t.Sub(c.start).Seconds()
	if pod == "" {
		fmt.Fprintf(c.out, "%7.3fs  %s\n", elapsed, msg)
		return
	}
	fmt.Fprintf(c.out, "%7.3fs  %-31s %s\n", elapsed, pod, msg)
}
