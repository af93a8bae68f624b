// Package mirrortest provides fakes for package mirror, for tests and for
// agents run without an API server.
//
//   - FakeClient is a mirror.MirrorPodClient that keeps mirror pods in memory,
//     records every call and can be told to fail. Use it where code needs a
//     MirrorPodClient and the test cares about what was asked.
//   - FakePodAPI is a mirror.PodAPI that behaves like an API server for
//     create, get and delete of pods (AlreadyExists, NotFound, Conflict on a
//     failed precondition). Put the real mirror.Client over it to test the
//     whole path, or use it in an example agent.
//
// Both are safe for concurrent use and never hand out the objects they store:
// every pod going in or out is a deep copy.
package mirrortest
