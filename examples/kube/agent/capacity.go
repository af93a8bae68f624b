package agent

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// addMemory adds the machine's memory (MemTotal of /proc/meminfo) to
// capacity, when it can be read. Without memory capacity the scheduler
// never places a pod that requests memory, and its balanced-allocation
// score, which counts unrequested memory as a default, would pile pods
// without requests onto whichever node first fills its CPUs.
func addMemory(capacity v1.ResourceList) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 {
				capacity[v1.ResourceMemory] = *resource.NewQuantity(kb<<10, resource.BinarySI)
			}
			return
		}
	}
}
