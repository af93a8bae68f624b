// Package clustertest runs a whole Kubernetes cluster inside one Go
// process, with podkit nodes whose pods really run: a test harness for node
// agents and for what runs on nodes, and the engine of the podkit-cluster
// command.
//
// Start brings up, in this process:
//
//   - etcd (embedded, fsync off, its data in the cluster's directory);
//   - kube-apiserver, on 127.0.0.1, authorizing with Node,RBAC and the
//     NodeRestriction admission plugin, with the ServiceAccount admission
//     plugin on; it reaches the nodes' kubelet API with a client
//     certificate and checks their serving certificates;
//   - kube-scheduler;
//   - kube-controller-manager with the Controllers (Deployments, Jobs,
//     DaemonSets, garbage collection, namespaces, node lifecycle and taint
//     eviction, ...), with node-lifecycle timings short enough for tests
//     (Options.NodeMonitorGracePeriod, Options.PodEvictionSeconds);
//   - one podkit node per NodeOptions: an agent (by default package
//     agent's, over the process runtime; Options.NewAgent for yours) with
//     its own node identity (a client certificate for system:node:<name>),
//     its own state directory, and a kubelet API on Options.NodeIP; plus a
//     heartbeat run by the harness, so a test can stop it while the agent
//     keeps running.
//
// One certificate authority, made for the cluster, signs every
// certificate. The components start from their own packages (the
// kube-apiserver, kube-scheduler and kube-controller-manager app packages),
// not from upstream's *testing.T test servers, so a program can run a
// cluster too.
//
// # Usage
//
// Start a cluster once per test binary or parent test (it takes seconds,
// more under -race), share it among parallel subtests that each use nodes
// of their own (AddNode with labels and taints keeps workloads apart), and
// Close it at the end. Cluster.Admin and Cluster.Kubeconfig give an
// administrator's access; Node stops and resumes a node's heartbeat and
// stops and starts its agent. Close stops the heartbeats and agents, then
// every process of the nodes' pods, then the control plane, and removes the
// cluster's directory: nothing is left behind.
//
// # Concurrency
//
// Every method of Cluster and Node is safe for concurrent use.
//
// # Limits
//
// klog is global to a process: Options.ControlPlaneLog redirects it for the
// whole process. Several clusters may run in one process (each component
// has its own feature-gate registry), at the cost of each. Linux only: the
// process runtime reads /proc.
package clustertest
