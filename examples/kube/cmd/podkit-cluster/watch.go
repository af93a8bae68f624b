package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watch prints a line for each node and pod whose summary changes, until
// ctx ends.
func watch(ctx context.Context, cs kubernetes.Interface, w io.Writer) {
	p := &printer{w: w, last: map[string]string{}}
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	pods := factory.Core().V1().Pods().Informer()
	_, _ = nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.node(o) },
		UpdateFunc: func(_, o any) { p.node(o) },
		DeleteFunc: p.gone,
	})
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.pod(o) },
		UpdateFunc: func(_, o any) { p.pod(o) },
		DeleteFunc: p.gone,
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// printer prints the summaries that changed.
type printer struct {
	mu   sync.Mutex
	w    io.Writer
	last map[string]string
}

func (p *printer) print(key, summary string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last[key] == summary {
		return
	}
	p.last[key] = summary
	fmt.Fprintf(p.w, "%s  %-40s %s\n", time.Now().Format("15:04:05"), key, summary)
}

func (p *printer) node(o any) {
	n, ok := o.(*v1.Node)
	if !ok {
		return
	}
	status := "NotReady"
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
			status = "Ready"
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key+":"+string(t.Effect))
	}
	if len(taints) > 0 {
		status += "  taints=" + strings.Join(taints, ",")
	}
	p.print("node/"+n.Name, status)
}

func (p *printer) pod(o any) {
	pod, ok := o.(*v1.Pod)
	if !ok {
		return
	}
	status := string(pod.Status.Phase)
	if pod.DeletionTimestamp != nil {
		status = "Terminating"
	}
	node := pod.Spec.NodeName
	if node == "" {
		node = "<unscheduled>"
	}
	p.print("pod/"+pod.Namespace+"/"+pod.Name, fmt.Sprintf("%-12s on %s", status, node))
}

func (p *printer) gone(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	switch obj := o.(type) {
	case *v1.Node:
		p.print("node/"+obj.Name, "deleted")
	case *v1.Pod:
		p.print("pod/"+obj.Namespace+"/"+obj.Name, "deleted")
	}
}
