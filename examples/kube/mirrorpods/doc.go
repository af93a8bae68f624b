// Package mirrorpods is what mirror.NewClient needs from client-go to keep
// real mirror pods: PodAPI, a clientset as mirror.PodAPI, and NodeUID, the
// node-UID lookup of mirror.ClientOptions (mirror pods are owned by their
// Node).
//
// # Usage
//
//	mirrors, err := mirror.NewClient(mirrorpods.NewPodAPI(cs.CoreV1()), mirror.ClientOptions{
//		NodeName: node,
//		NodeUID:  mirrorpods.NodeUID(cs.CoreV1(), node),
//	})
//
// # Concurrency
//
// PodAPI keeps no state and is safe for concurrent use, as is the function
// NodeUID returns.
package mirrorpods
