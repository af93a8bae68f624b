package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// console is where an agent prints its timeline: one whole line per event,
// stamped with the time since the agent started. Both runtimes' agents
// embed it.
type console struct {
	out   io.Writer
	start time.Time
	// outMu keeps output lines whole.
	outMu sync.Mutex
}

func newConsole(out io.Writer) console { return console{out: out, start: time.Now()} }

// lineAt prints one line about pod (empty: the agent), stamped with the
// time since the agent started at t, when it happened.
func (c *console) lineAt(t time.Time, pod, msg string) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	elapsed := t.Sub(c.start).Seconds()
	if pod == "" {
		fmt.Fprintf(c.out, "%7.3fs  %s\n", elapsed, msg)
		return
	}
	fmt.Fprintf(c.out, "%7.3fs  %-31s %s\n", elapsed, pod, msg)
}
