package mountinfo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	table := `22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
90 35 0:30 /a\040b /mnt/with\040space rw - cgroup2 cgroup2 rw
broken line
91 35 0:31 / /x rw - 
`
	got, err := parse(strings.NewReader(table))
	require.NoError(t, err)
	assert.Equal(t, []Mount{
		{ID: 22, Parent: 1, Root: "/", MountPoint: "/proc", FSType: "proc", Super: "rw"},
		{ID: 35, Parent: 25, Root: "/", MountPoint: "/sys/fs/cgroup/unified", FSType: "cgroup2", Super: "rw,nsdelegate"},
		{ID: 90, Parent: 35, Root: "/a b", MountPoint: "/mnt/with space", FSType: "cgroup2", Super: "rw"},
	}, got)
}

func TestReadFindsTheRoot(t *testing.T) {
	mounts, err := Read()
	if err != nil {
		t.Skipf("no mount table here: %v", err)
	}
	var mountPoints []string
	for _, m := range mounts {
		mountPoints = append(mountPoints, m.MountPoint)
	}
	assert.Contains(t, mountPoints, "/")
}
