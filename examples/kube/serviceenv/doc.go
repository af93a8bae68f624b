// Package serviceenv gives pods the service variables the kubelet gives
// them (KUBERNETES_SERVICE_HOST, <NAME>_SERVICE_PORT, <NAME>_PORT_<port>_TCP
// and the rest of the Docker-link style set): podenv.Options.ServiceEnv
// of an agent in a real cluster, from a watch of the cluster's Services.
//
// # Usage
//
//  1. Create a Source with New over the node's clientset (a node may list
//     and watch Services under the Node authorizer, as a kubelet does).
//  2. Give Source.Env as the agent's podenv.Options.ServiceEnv.
//  3. Run it as one of the agent's loops (Source.Run); until its first
//     list is read, Env returns an error, so containers wait (the podenv
//     builder reports a ConfigError and the sync is retried), as on a
//     kubelet that has not read the services yet.
//
// # What it gives
//
// For a pod in namespace N: the variables of every Service of N that has
// a cluster IP (not headless), when the pod's enableServiceLinks is true
// (the API's default), and always those of the "kubernetes" Service of
// the default namespace, as the kubelet does. A Service of N named
// "kubernetes" takes the place of the default one. Variables of the
// container's own env win over these (podenv's rule).
//
// # Concurrency
//
// Env may be called from any goroutine, concurrently, once New returned.
package serviceenv
