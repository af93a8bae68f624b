package kubeletserver_test

import (
	"fmt"
	"net/url"
	"time"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// ParseLogOptions reads a containerLogs query as the kubelet does, and
// bounds it: a window beyond the epoch is the whole log, a count beyond
// an int64 a clear 400.
func ExampleParseLogOptions() {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, query := range []string{"follow=true&sinceSeconds=60", "sinceSeconds=9300000000", "tailLines=99999999999999999999"} {
		q, _ := url.ParseQuery(query)
		opts, status, err := kubeletserver.ParseLogOptions(q, now)
		switch {
		case err != nil:
			fmt.Printf("%s: %d %v\n", query, status, err)
		case opts.SinceTime != nil:
			fmt.Printf("%s: follow=%t since %s\n", query, opts.Follow, opts.SinceTime.UTC().Format(time.TimeOnly))
		default:
			fmt.Printf("%s: the whole log\n", query)
		}
	}
	// Output:
	// follow=true&sinceSeconds=60: follow=true since 09:59:00
	// sinceSeconds=9300000000: the whole log
	// tailLines=99999999999999999999: 400 tailLines=99999999999999999999 is out of range: at most 9223372036854775807
}
