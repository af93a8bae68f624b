package clustertest

import (
	"flag"
	"io"

	"k8s.io/klog/v2"
)

// redirectKlog sends klog's output (the control plane's logs) to w
// instead of stderr. klog is global: this is for the whole process.
func redirectKlog(w io.Writer) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(w)
}
