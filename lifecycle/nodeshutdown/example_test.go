package nodeshutdown_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The node goes down: every pod is stopped within the budget, critical
// pods last, and from then on no pod is admitted. Other pods get the budget
// less the critical share (15s); critical pods what is left when the others
// are done (all of it, as they stopped at once).
func ExampleManager_Shutdown() {
	syncer := podworkertest.NewFakeSyncer[struct{}]()
	agent, _ := lifecycle.NewAgent[struct{}](syncer, lifecycle.AgentOptions[struct{}]{
		SyncLoop: lifecycle.SyncLoopOptions{Sources: []string{mirror.ApiserverSource}},
		Clock:    testingclock.NewFakeClock(time.Unix(0, 0)), // time stands still: the example shows the budget's split
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx) }()

	web := podworkertest.NewPod("web-uid", "default", "web")
	dns := podworkertest.NewPod("dns-uid", "kube-system", "dns")
	dns.Spec.PriorityClassName = nodeshutdown.SystemClusterCritical
	_ = agent.Config().SetPods(ctx, mirror.ApiserverSource, []*v1.Pod{web, dns})
	_ = syncer.WaitForTrace(ctx, web.UID, "sync:create")
	_ = syncer.WaitForTrace(ctx, dns.UID, "sync:create")

	report, err := agent.NodeShutdown().Shutdown(ctx, nodeshutdown.Budget{GracePeriod: 20 * time.Second, CriticalGracePeriod: 5 * time.Second})
	fmt.Println("err:", err)
	for _, p := range report.Terminated {
		fmt.Printf("%s critical=%v grace=%ds\n", p.FullName, p.Critical, p.GracePeriod)
	}

	// From now on every pod is refused.
	r := agent.NodeShutdown().Admit(ctx, nil)
	fmt.Println("admit:", r.Admit, r.Reason)

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// err: <nil>
	// web_default critical=false grace=15s
	// dns_kube-system critical=true grace=20s
	// admit: false NodeShutdown
	// Run: <nil>
}
