// Package simcloud is an in-memory simulated cloud container service: a
// virtualkubelet.Backend that behaves the way a real provider's remote API
// does. Calls take time (Options.Latency), fail now and then
// (Options.FailureRate) before they take effect, and can be held up for one
// pod (Cloud.Pause); containers run until they are stopped or their
// workload ends (Cloud.Exit), and the cloud itself applies the pod's
// restart policy. Every call is recorded (Cloud.Calls), so a test can
// assert what the backend saw.
//
// Time comes from an injected clock and randomness from a seeded source.
// It is meant for tests and demos; nothing is persisted.
package simcloud
