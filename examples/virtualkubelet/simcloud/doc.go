// Package simcloud is an in-memory simulated cloud container service: a
// virtualkubelet.Backend that behaves the way a real provider's remote API
// does. Calls take time (Options.Latency), fail now and then
// (Options.FailureRate) before they take effect, and can be held up for one
// pod (Cloud.Pause); containers run until they are stopped or their
// workload ends (Cloud.Exit), and the cloud itself applies the pod's
// restart policy. Every call is recorded (Cloud.Calls), so a test can
// assert what the backend saw.
//
// Containers have simulated insides for the streaming calls: Exec runs a
// few known commands (echo, cat, env, hostname, sleep, stty size, exit),
// Attach echoes the client's input into the container's output, which Logs
// serves (bounded by MaxLogBytes), and PortForward reaches an echo server
// on every port a container declares. Usage reports each running
// container's CPU and memory from its resource requests, or what SetUsage
// set.
//
// Time comes from an injected clock and randomness from a seeded source.
// It is meant for tests and demos; nothing is persisted.
package simcloud
