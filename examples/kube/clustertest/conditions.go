package clustertest

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The conditions of WaitFor for the workloads tests create most. Each says
// what kubectl would: a pod's phase or readiness, a Deployment, StatefulSet
// or DaemonSet rolled out (kubectl rollout status), a Job complete (kubectl
// wait --for=condition=Complete). Those that can see the object will never
// get there (a pod that failed, a Job that failed, a Deployment past its
// progress deadline) end the wait with an error.

// PodRunning is met by a pod in phase Running that is not being deleted.
// A pod that ended (Succeeded or Failed) fails it.
func PodRunning() Condition[*v1.Pod] {
	return Condition[*v1.Pod]{Description: "Running", Met: func(p *v1.Pod) (bool, error) {
		if p == nil {
			return false, nil
		}
		if err := podEnded(p); err != nil {
			return false, err
		}
		return p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil, nil
	}}
}

// PodReady is met by a pod whose Ready condition is True. A pod that ended
// fails it.
func PodReady() Condition[*v1.Pod] {
	return Condition[*v1.Pod]{Description: "Ready", Met: func(p *v1.Pod) (bool, error) {
		if p == nil {
			return false, nil
		}
		if err := podEnded(p); err != nil {
			return false, err
		}
		return podConditionTrue(p, v1.PodReady), nil
	}}
}

// PodSucceeded is met by a pod in phase Succeeded. A Failed pod fails it.
func PodSucceeded() Condition[*v1.Pod] {
	return Condition[*v1.Pod]{Description: "Succeeded", Met: func(p *v1.Pod) (bool, error) {
		switch {
		case p == nil:
			return false, nil
		case p.Status.Phase == v1.PodFailed:
			return false, fmt.Errorf("the pod failed: %s", Describe(p))
		}
		return p.Status.Phase == v1.PodSucceeded, nil
	}}
}

// podEnded returns an error when p is in a terminal phase.
func podEnded(p *v1.Pod) error {
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return fmt.Errorf("the pod ended %s", p.Status.Phase)
	}
	return nil
}

func podConditionTrue(p *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// DeploymentRolledOut is met by a Deployment whose controller has seen its
// latest spec and whose replicas are all updated and available, as
// kubectl rollout status waits for. One past its progress deadline fails
// it.
func DeploymentRolledOut() Condition[*appsv1.Deployment] {
	return Condition[*appsv1.Deployment]{Description: "rolled out", Met: func(d *appsv1.Deployment) (bool, error) {
		if d == nil || d.Status.ObservedGeneration < d.Generation {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return false, fmt.Errorf("its progress deadline passed: %s", c.Message)
			}
		}
		want := replicas(d.Spec.Replicas)
		s := d.Status
		return s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want, nil
	}}
}

// StatefulSetRolledOut is met by a StatefulSet whose controller has seen
// its latest spec and whose replicas are all ready and of its current
// revision.
func StatefulSetRolledOut() Condition[*appsv1.StatefulSet] {
	return Condition[*appsv1.StatefulSet]{Description: "rolled out", Met: func(s *appsv1.StatefulSet) (bool, error) {
		if s == nil || s.Status.ObservedGeneration < s.Generation {
			return false, nil
		}
		want := replicas(s.Spec.Replicas)
		st := s.Status
		return st.Replicas == want && st.ReadyReplicas == want && st.UpdatedReplicas == want &&
			st.CurrentRevision == st.UpdateRevision, nil
	}}
}

// DaemonSetRolledOut is met by a DaemonSet whose controller has seen its
// latest spec and whose pods, one on each node it should run on, are all
// updated and ready.
func DaemonSetRolledOut() Condition[*appsv1.DaemonSet] {
	return Condition[*appsv1.DaemonSet]{Description: "rolled out", Met: func(d *appsv1.DaemonSet) (bool, error) {
		if d == nil || d.Status.ObservedGeneration < d.Generation {
			return false, nil
		}
		s := d.Status
		return s.DesiredNumberScheduled > 0 && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
			s.NumberReady == s.DesiredNumberScheduled, nil
	}}
}

// JobComplete is met by a Job whose Complete condition is True. A Job
// whose Failed condition is True fails it.
func JobComplete() Condition[*batchv1.Job] {
	return Condition[*batchv1.Job]{Description: "Complete", Met: func(j *batchv1.Job) (bool, error) {
		if j == nil {
			return false, nil
		}
		for _, c := range j.Status.Conditions {
			switch {
			case c.Type == batchv1.JobFailed && c.Status == v1.ConditionTrue:
				return false, fmt.Errorf("the Job failed (%s: %s)", c.Reason, c.Message)
			case c.Type == batchv1.JobComplete && c.Status == v1.ConditionTrue:
				return true, nil
			}
		}
		return false, nil
	}}
}

// CronJobSucceeded is met by a CronJob that has run a Job to completion
// (its status has a last successful time).
func CronJobSucceeded() Condition[*batchv1.CronJob] {
	return Match("to have run a Job to completion", func(c *batchv1.CronJob) bool {
		return c != nil && c.Status.LastSuccessfulTime != nil
	})
}

// Gone is met once the object does not exist.
func Gone[T runtime.Object]() Condition[T] {
	return Match("gone", func(obj T) bool { return isNil(obj) })
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// Describe summarizes obj in one line for a failure message: the status
// fields that matter for the kinds of this package's conditions (and
// Nodes), the status as JSON for other kinds. WaitFor's errors use it.
func Describe(obj runtime.Object) string {
	if isNil(obj) {
		return "<none: it does not exist>"
	}
	switch o := obj.(type) {
	case *v1.Pod:
		return describePod(o)
	case *appsv1.Deployment:
		s := o.Status
		return fmt.Sprintf("%s generation=%d observed=%d replicas=%d/%d updated=%d available=%d conditions=%s",
			o.Name, o.Generation, s.ObservedGeneration, s.Replicas, replicas(o.Spec.Replicas), s.UpdatedReplicas, s.AvailableReplicas, deploymentConditions(s.Conditions))
	case *appsv1.StatefulSet:
		s := o.Status
		return fmt.Sprintf("%s generation=%d observed=%d replicas=%d/%d ready=%d updated=%d revision=%s update-revision=%s",
			o.Name, o.Generation, s.ObservedGeneration, s.Replicas, replicas(o.Spec.Replicas), s.ReadyReplicas, s.UpdatedReplicas, s.CurrentRevision, s.UpdateRevision)
	case *appsv1.DaemonSet:
		s := o.Status
		return fmt.Sprintf("%s generation=%d observed=%d desired=%d scheduled=%d ready=%d updated=%d",
			o.Name, o.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, s.CurrentNumberScheduled, s.NumberReady, s.UpdatedNumberScheduled)
	case *batchv1.Job:
		s := o.Status
		var conds []string
		for _, c := range s.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
		}
		return fmt.Sprintf("%s active=%d succeeded=%d failed=%d conditions=[%s]", o.Name, s.Active, s.Succeeded, s.Failed, strings.Join(conds, " "))
	case *batchv1.CronJob:
		s := o.Status
		return fmt.Sprintf("%s schedule=%q active=%d lastSchedule=%v lastSuccessful=%v", o.Name, o.Spec.Schedule, len(s.Active), s.LastScheduleTime, s.LastSuccessfulTime)
	case *v1.Node:
		var conds []string
		for _, c := range o.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
		var taints []string
		for _, t := range o.Spec.Taints {
			taints = append(taints, t.Key+":"+string(t.Effect))
		}
		return fmt.Sprintf("%s conditions=[%s] taints=[%s] unschedulable=%v", o.Name, strings.Join(conds, " "), strings.Join(taints, " "), o.Spec.Unschedulable)
	}
	return describeJSON(obj)
}

func describePod(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s phase=%s node=%s", p.Name, p.Status.Phase, p.Spec.NodeName)
	if p.DeletionTimestamp != nil {
		b.WriteString(" deleting")
	}
	if p.Status.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", p.Status.Reason)
	}
	var conds []string
	for _, c := range p.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	fmt.Fprintf(&b, " conditions=[%s] containers=[", strings.Join(conds, " "))
	for i, c := range p.Status.ContainerStatuses {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:", c.Name)
		switch s := c.State; {
		case s.Running != nil:
			b.WriteString("running")
		case s.Waiting != nil:
			fmt.Fprintf(&b, "waiting(%s)", s.Waiting.Reason)
		case s.Terminated != nil:
			fmt.Fprintf(&b, "terminated(%s,exit %d)", s.Terminated.Reason, s.Terminated.ExitCode)
		default:
			b.WriteString("unknown")
		}
		fmt.Fprintf(&b, ",restarts=%d", c.RestartCount)
	}
	b.WriteString("]")
	return b.String()
}

func deploymentConditions(cs []appsv1.DeploymentCondition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return "[" + strings.Join(out, " ") + "]"
}
