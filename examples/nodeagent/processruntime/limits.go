package processruntime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultPodPidsLimit is the most processes a pod may have at once when
// Options.PodPidsLimit is zero.
const DefaultPodPidsLimit = 1024

// Limits says how the runtime enforces each kind of a pod's limit: "cgroup
// v2" or "cgroup v1" (the controller's hierarchy), "RLIMIT_NPROC" for
// pids on a machine with no pids controller, or "" when the machine
// offers nothing for it (the limit is not enforced; Missing lists it).
type Limits struct {
	// Pids bounds the processes of a pod (Options.PodPidsLimit).
	Pids string
	// Memory and CPU enforce the pod's memory and cpu limits (the sum of
	// its containers', or its pod-level resources), and CPU its requests
	// as a share.
	Memory, CPU string
}

// Missing lists the kinds of limits the machine cannot enforce, for an
// agent's Node conditions or events.
func (l Limits) Missing() []string {
	var out []string
	for _, k := range []struct{ kind, how string }{{"pids", l.Pids}, {"memory", l.Memory}, {"cpu", l.CPU}} {
		if k.how == "" {
			out = append(out, k.kind)
		}
	}
	return out
}

// podLimits is what one pod's cgroups are given: zero fields are no limit.
type podLimits struct {
	pids int64
	// memory in bytes; cpuQuota in microseconds per cpuPeriod.
	memory   int64
	cpuQuota int64
	// cpuShares is the cgroup v1 weight of the pod's cpu requests.
	cpuShares uint64
}

// cpuPeriod is the CFS period the cpu limit is a quota of (as the
// kubelet's default).
const cpuPeriod = 100000

// limitsOf computes a pod's limits as the kubelet sizes a pod's cgroup:
// the pod-level resources when set; else, when every regular container
// has a limit, the larger of their sum and the largest init container's;
// cpu shares from the requests the same way (at least 2).
func limitsOf(pod *v1.Pod, pids int64) podLimits {
	l := podLimits{pids: pids}
	limit := func(name v1.ResourceName) (int64, bool) {
		if pod.Spec.Resources != nil {
			if q, ok := pod.Spec.Resources.Limits[name]; ok {
				return value(name, q), true
			}
		}
		var sum int64
		for _, c := range pod.Spec.Containers {
			q, ok := c.Resources.Limits[name]
			if !ok {
				return 0, false
			}
			sum += value(name, q)
		}
		for _, c := range pod.Spec.InitContainers {
			if q, ok := c.Resources.Limits[name]; ok {
				sum = max(sum, value(name, q))
			}
		}
		return sum, true
	}
	if m, ok := limit(v1.ResourceMemory); ok {
		l.memory = m
	}
	if milli, ok := limit(v1.ResourceCPU); ok && milli > 0 {
		l.cpuQuota = max(milli*cpuPeriod/1000, 1000)
	}
	var req int64
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Requests[v1.ResourceCPU]; ok {
			req = q.MilliValue()
		}
	}
	if req == 0 {
		for _, c := range pod.Spec.Containers {
			if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
				req += q.MilliValue()
			}
		}
		for _, c := range pod.Spec.InitContainers {
			if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
				req = max(req, q.MilliValue())
			}
		}
	}
	l.cpuShares = uint64(max(req*1024/1000, 2))
	return l
}

// value is a quantity in the unit its cgroup file takes: millicores for
// cpu, bytes for memory.
func value(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// cpuWeight converts cgroup v1 cpu shares to a cgroup v2 cpu.weight, as
// the container runtimes do.
func cpuWeight(shares uint64) uint64 {
	if shares < 2 {
		shares = 2
	}
	return 1 + ((min(shares, 262144)-2)*9999)/262142
}
