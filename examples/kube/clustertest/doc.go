// Package clustertest runs a whole Kubernetes cluster for a Go test or
// program, with podkit nodes whose pods really run: a test harness for node
// agents and for what runs on nodes, and the engine of the podkit-cluster
// command.
//
// Start brings up:
//
//   - a control plane in a child process, the podkit-controlplane program of
//     this module (cmd/podkit-controlplane), which Start builds with the go
//     command the first time (BuildControlPlane; Options.ControlPlane names
//     a binary instead). A module importing clustertest so never requires
//     k8s.io/kubernetes nor its replace directives, and its test binaries
//     never link it. The program runs:
//   - etcd (embedded, fsync off), taking only mutual-TLS clients with a
//     certificate of an etcd CA of its own, which only the API server has;
//   - kube-apiserver, on 127.0.0.1, authorizing with Node,RBAC and the
//     NodeRestriction admission plugin, with the ServiceAccount admission
//     plugin on; it reaches the nodes' kubelet API with a client
//     certificate and checks their serving certificates; it takes
//     bootstrap tokens (CreateBootstrapToken, WriteBootstrapKubeconfig:
//     a node joins by TLS bootstrap, as on a kubeadm cluster, with the
//     RBAC kubeadm creates for it); it proxies aggregated APIs with a
//     front-proxy client certificate; it reports the
//     version of k8s.io/kubernetes it is built from (kubectl version);
//   - kube-scheduler;
//   - kube-controller-manager with its default controllers (the same
//     set a kube-controller-manager runs by default: Deployments,
//     ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs, garbage
//     collection, namespaces, endpoints and EndpointSlices, service
//     accounts and their tokens, node lifecycle and taint eviction, node
//     IPAM, disruption budgets, resource quotas, pod GC, TTL after
//     finished, CSR approval and signing, volumes...) plus the bootstrap
//     signer and token cleaner, but for the serving-ClusterTrustBundle
//     publisher; node-lifecycle timings short
//     enough for tests (Options.NodeMonitorGracePeriod,
//     Options.PodEvictionSeconds); each Node gets a /24 of the cluster's
//     pod range (Options.ClusterCIDR) as spec.podCIDR;
//   - in this process, an approver of the nodes' serving CSRs (package
//     csrapprover), which kube-controller-manager signs but does not
//     approve;
//   - in this process, one podkit node per NodeOptions: an agent (by default
//     package agent's, over the process runtime; Options.NewAgent for
//     yours) with its own node identity (a client certificate for
//     system:node:<name>), its own state directory, and a kubelet API on
//     Options.NodeIP; plus a heartbeat run by the harness, so a test can
//     stop it while the agent keeps running, and inspect the agent itself
//     (Node.Agent). The default agents run their pods' sandbox stages and
//     log shims from processruntime's cmd/podkit-stages, which Start
//     builds (BuildStages; Options.StageExecutable names a binary instead,
//     Options.OwnStageExecutable runs them from the agent's own
//     executable), for a fraction of the CPU per pod start.
//
// One certificate authority, made for the cluster, signs every certificate
// but etcd's. The control plane's files (keys, certificates, kubeconfigs,
// etcd's data) and the nodes' state directories are apart in the
// cluster's directory, readable by their owner only (see Options.Dir).
// The control plane is quiet unless Options.ControlPlaneLog is set.
//
// # Usage
//
// Start a cluster once per test binary or parent test (it takes seconds,
// more under -race), share it among parallel subtests that each use nodes
// of their own (AddNode with labels and taints keeps workloads apart), and
// Close it at the end. Cluster.Admin and Cluster.Kubeconfig give an
// administrator's access; Node stops and resumes a node's heartbeat and
// stops and starts its agent. AddNodes starts many nodes at once, each
// still an agent of its own (for a density benchmark of a hundred hollow
// nodes: Options.NewAgent HollowAgent, whose pods run no process, with
// Options.NodeStatusReportInterval so that their heartbeats renew the
// Lease alone, as a kubelet's do). WaitFor waits for an object to meet a
// Condition (PodRunning, DeploymentRolledOut, StatefulSetRolledOut,
// JobComplete, Gone, or Match for your own) and says what it saw last when
// it times out. Close stops the heartbeats and agents, then every process
// of the nodes' pods, then the control plane, and removes the cluster's
// directory: nothing is left behind but the control plane and stages
// binaries in the user's cache directory, which later runs reuse.
//
// The embedder's duties:
//
//  1. Have the go command on PATH and this module's source on disk the
//     first time (or give Options.ControlPlane).
//  2. Close the cluster: the pods' processes outlive their agents by
//     design. (If the process dies instead, the control plane stops on
//     its own: it watches its standard input, whose other end this
//     process holds.)
//  3. For an agent the harness does not run (NodeConfig), stop its pods'
//     processes with StopPodProcesses once it is stopped.
//
// # Pod network and node shutdown
//
// The default agent runs each pod in a sandbox of its own where the
// machine allows it (root, user namespaces, Linux 5.12+), on the node's
// pod network: each node has a bridge of its own (agent.BridgeName of its
// range) and gives its pods addresses of its spec.podCIDR, shown in
// status.podIP. Several nodes, and several clusters, share one host
// without colliding: the ranges are disjoint (the cluster's is chosen
// apart from every address the host has) and so are the bridges. The
// host reaches every pod (probes, kubectl port-forward); pods of one node
// reach each other; pods of two nodes reach each other only if the host
// forwards IPv4 (net.ipv4.ip_forward), which clustertest never turns on.
// No pod reaches what listens on the host's loopback only: etcd (which
// takes mutual-TLS clients only anyway), the API server, the agents'
// local endpoints. Pods get /etc/hosts and /etc/resolv.conf as on a
// kubelet, with Options.ClusterDomain; the cluster runs no DNS server
// and no kube-proxy, so Services have no addresses pods can use. Where
// the machine has no sandbox, pods run in the host's namespaces and
// network, with the host's /etc files (processruntime's Containment says
// why), and everything that listens on the host's loopback is reachable
// from pods.
//
// Close kills the pods with one second of grace. Shutdown (Cluster or
// Node) first shuts the nodes down as a kubelet's graceful node shutdown:
// pods get their terminationGracePeriodSeconds and preStop hooks within
// a budget, critical pods last; podkit-cluster does so at Ctrl-C.
//
// # Concurrency
//
// Every method of Cluster and Node is safe for concurrent use, and so is
// WaitFor.
//
// # Limits
//
// Linux only: the process runtime reads /proc, and the control plane
// build takes a lock with flock. The control plane binary is built with
// the race detector when the calling program is (to reuse its compiled
// packages); it is about 200 MB. Several clusters may run in one process,
// each with a control plane process of its own.
package clustertest
