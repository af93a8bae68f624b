package podnet

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func testIPAM(t *testing.T, dir, cidr string) *ipam {
	t.Helper()
	a, err := openIPAM(dir, netip.MustParsePrefix(cidr))
	require.NoError(t, err)
	return a
}

// Each UID gets one address of the range, the same on every call and
// after a reopen, persisted as a file holding the UID.
func TestIPAMAllocatesOnePerUIDAndPersists(t *testing.T) {
	dir := t.TempDir()
	a := testIPAM(t, dir, "10.88.0.0/24")
	seen := map[netip.Addr]types.UID{}
	for i := range 20 {
		uid := types.UID(fmt.Sprintf("pod-%d", i))
		ip, err := a.allocate(uid)
		require.NoError(t, err)
		require.True(t, a.inRange(ip), "%s", ip)
		require.NotContains(t, seen, ip, "handed out twice")
		seen[ip] = uid
		again, err := a.allocate(uid)
		require.NoError(t, err)
		require.Equal(t, ip, again)
		b, err := os.ReadFile(filepath.Join(dir, ip.String()))
		require.NoError(t, err)
		require.Equal(t, string(uid)+"\n", string(b))
	}
	assert.Equal(t, netip.MustParseAddr("10.88.0.2"), a.byUID["pod-0"], "the first pod address follows the gateway")

	b := testIPAM(t, dir, "10.88.0.0/24")
	for ip, uid := range seen {
		got, ok := b.lookup(uid)
		require.True(t, ok, uid)
		require.Equal(t, ip, got)
	}
	ip, err := b.allocate("pod-new")
	require.NoError(t, err)
	require.NotContains(t, seen, ip)
}

// A released address is handed out again only once the rest of the range
// has been.
func TestIPAMReleaseAndReuseOrder(t *testing.T) {
	a := testIPAM(t, t.TempDir(), "10.88.0.0/29") // pods .2 to .6
	ip1, err := a.allocate("a")
	require.NoError(t, err)
	require.NoError(t, a.release("a"))
	require.NoError(t, a.release("a"), "releasing again")
	_, ok := a.lookup("a")
	require.False(t, ok)
	var order []netip.Addr
	for _, uid := range []types.UID{"b", "c", "d", "e", "f"} {
		ip, err := a.allocate(uid)
		require.NoError(t, err)
		order = append(order, ip)
	}
	assert.Equal(t, ip1, order[len(order)-1], "the released address came back before the others")
}

// A full range is ErrRangeExhausted, naming the range; a release frees one.
func TestIPAMExhaustion(t *testing.T) {
	for _, c := range []struct {
		cidr string
		size int
	}{{"10.88.0.0/30", 1}, {"10.88.0.0/29", 5}, {"10.88.0.0/24", 253}} {
		t.Run(c.cidr, func(t *testing.T) {
			a := testIPAM(t, t.TempDir(), c.cidr)
			require.Equal(t, c.size, a.size())
			for i := range c.size {
				_, err := a.allocate(types.UID(fmt.Sprintf("pod-%d", i)))
				require.NoError(t, err)
			}
			_, err := a.allocate("one-too-many")
			require.ErrorIs(t, err, ErrRangeExhausted)
			require.ErrorContains(t, err, c.cidr)
			require.NoError(t, a.release("pod-0"))
			_, err = a.allocate("one-too-many")
			require.NoError(t, err)
		})
	}
}

// Files the IPAM did not write are respected: an address with a file
// nobody told it about is skipped, an unreadable one stays taken, a file
// outside the range is replaced by an address inside it.
func TestIPAMForeignFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10.88.0.2"), []byte("..\n"), 0o600))       // no valid UID
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10.99.0.7"), []byte("moved\n"), 0o600))    // outside the range
	require.NoError(t, os.WriteFile(filepath.Join(dir, tempPrefix+"x"), []byte("half"), 0o600))    // a crash's
	require.NoError(t, os.WriteFile(filepath.Join(dir, "not-an-address"), []byte("pod\n"), 0o600)) // not ours
	a := testIPAM(t, dir, "10.88.0.0/24")
	_, ok := a.lookup("moved")
	require.False(t, ok)
	assert.Equal(t, []types.UID{"moved"}, a.owners())

	// Written behind the IPAM's back, after it read the directory.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10.88.0.3"), []byte("other\n"), 0o600))
	ip, err := a.allocate("pod")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.88.0.4"), ip, "skips the unreadable .2 and the foreign .3")

	ip, err = a.allocate("moved")
	require.NoError(t, err)
	assert.True(t, a.inRange(ip))
	assert.NoFileExists(t, filepath.Join(dir, "10.99.0.7"), "the out-of-range allocation was kept")

	assert.ElementsMatch(t, []netip.Addr{netip.MustParseAddr("10.88.0.2"), netip.MustParseAddr("10.88.0.3")}, a.strays())
	for _, ip := range a.strays() {
		require.NoError(t, a.releaseAddr(ip))
	}
	require.NoError(t, a.removeTemps())
	assert.NoFileExists(t, filepath.Join(dir, tempPrefix+"x"))
	assert.FileExists(t, filepath.Join(dir, "not-an-address"))
	assert.Empty(t, a.strays())
}
