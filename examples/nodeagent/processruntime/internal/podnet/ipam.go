package podnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// ErrRangeExhausted is returned (wrapped, with the range) by Attach when
// every address of the pod range is held by a pod: the node runs as many
// pods as its range has addresses.
var ErrRangeExhausted = errors.New("podnet: no free IP in the pod range")

// ipam allocates one IPv4 address per pod UID from a range, persisted as
// one file per address: named by the address, holding the owner's UID and
// a newline. A file is created complete under a temporary name and linked
// to its address's name, which fails if the name exists: so a file is
// either absent or whole, and two owners can never hold one address, even
// across processes. It is not safe for concurrent use (Network serializes
// it).
type ipam struct {
	dir         string
	prefix      netip.Prefix
	first, last netip.Addr

	// byIP holds every allocation file of the directory, in the range or
	// not, by address: its owner, or "" when the file's content is no
	// valid UID (such an address stays taken until Sweep removes it).
	byIP map[netip.Addr]types.UID
	// byUID is each owner's address in the range; an owner whose only
	// files lie outside the range (the range changed) is not in it, and
	// gets a new address at its next allocate. Invariant: byIP[byUID[u]]
	// == u for every u.
	byUID map[types.UID]netip.Addr
	// next is where the search for a free address starts: after the last
	// address handed out, so an address just released is the last to be
	// handed out again.
	next netip.Addr
}

// tempPrefix starts the names of allocation files being written. No UID or
// address starts with it.
const tempPrefix = ".tmp-"

// openIPAM reads the allocations under dir, creating it if missing.
func openIPAM(dir string, prefix netip.Prefix) (*ipam, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("podnet: IPAM directory: %w", err)
	}
	a := &ipam{
		dir:    dir,
		prefix: prefix,
		byIP:   map[netip.Addr]types.UID{},
		byUID:  map[types.UID]netip.Addr{},
	}
	a.first, a.last = podRange(prefix)
	a.next = a.first
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("podnet: IPAM directory: %w", err)
	}
	for _, e := range entries {
		ip, err := netip.ParseAddr(e.Name())
		if err != nil || !ip.Is4() || ip.String() != e.Name() {
			continue // a temporary file, or not ours: Sweep removes the first kind
		}
		uid, err := readOwner(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		a.byIP[ip] = uid // "" when unreadable: the address stays taken
		if uid == "" || !a.inRange(ip) {
			continue
		}
		if _, dup := a.byUID[uid]; !dup {
			a.byUID[uid] = ip
		}
		// A second address of one owner cannot come from this package; it
		// stays taken (by its owner) until release or Sweep.
	}
	return a, nil
}

// readOwner returns the UID a file holds, "" when it holds none that is
// valid, and an error only when the file is gone.
func readOwner(path string) (types.UID, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	uid := types.UID(strings.TrimSuffix(string(b), "\n"))
	if err != nil || checkUID(uid) != nil {
		return "", nil
	}
	return uid, nil
}

func (a *ipam) inRange(ip netip.Addr) bool {
	return ip.Is4() && a.first.Compare(ip) <= 0 && ip.Compare(a.last) <= 0
}

// size is how many addresses the range has for pods.
func (a *ipam) size() int {
	return int(addrToUint32(a.last)-addrToUint32(a.first)) + 1
}

// lookup returns uid's address, if it has one in the range.
func (a *ipam) lookup(uid types.UID) (netip.Addr, bool) {
	ip, ok := a.byUID[uid]
	return ip, ok
}

// allocate returns uid's address, allocating and persisting one if it has
// none in the range. An error means uid has no address; it wraps
// ErrRangeExhausted when the range is full.
func (a *ipam) allocate(uid types.UID) (netip.Addr, error) {
	if ip, ok := a.byUID[uid]; ok {
		return ip, nil
	}
	ip := a.next
	for range a.size() {
		if _, taken := a.byIP[ip]; !taken {
			err := a.create(ip, uid)
			if err == nil {
				a.byIP[ip] = uid
				a.byUID[uid] = ip
				a.next = a.after(ip)
				a.removeOutOfRange(uid)
				return ip, nil
			}
			if !errors.Is(err, os.ErrExist) {
				return netip.Addr{}, err
			}
			// Someone else's file appeared: the address is taken.
			a.byIP[ip] = ""
		}
		ip = a.after(ip)
	}
	return netip.Addr{}, fmt.Errorf("%w: all %d addresses of %s are held by pods", ErrRangeExhausted, a.size(), a.prefix)
}

// after is the address after ip in the range, wrapping around.
func (a *ipam) after(ip netip.Addr) netip.Addr {
	if ip.Compare(a.last) >= 0 {
		return a.first
	}
	return ip.Next()
}

// create writes the allocation file of ip for uid; the error wraps
// os.ErrExist if ip has a file.
func (a *ipam) create(ip netip.Addr, uid types.UID) error {
	tmp, err := os.CreateTemp(a.dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("podnet: allocate %s: %w", ip, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(string(uid) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("podnet: allocate %s: %w", ip, err)
	}
	if err := os.Link(tmp.Name(), filepath.Join(a.dir, ip.String())); err != nil {
		return fmt.Errorf("podnet: allocate %s: %w", ip, err)
	}
	return syncDir(a.dir)
}

// removeOutOfRange removes uid's allocation files outside the range, once
// it has one inside.
func (a *ipam) removeOutOfRange(uid types.UID) {
	for ip, owner := range a.byIP {
		if owner == uid && !a.inRange(ip) {
			if err := a.remove(ip); err == nil {
				delete(a.byIP, ip)
			}
		}
	}
}

// release removes every allocation of uid. Releasing a UID with none is
// not an error.
func (a *ipam) release(uid types.UID) error {
	var errs []error
	for ip, owner := range a.byIP {
		if owner != uid {
			continue
		}
		if err := a.remove(ip); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(a.byIP, ip)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	delete(a.byUID, uid)
	return nil
}

// releaseAddr removes the allocation file of ip, whoever holds it.
func (a *ipam) releaseAddr(ip netip.Addr) error {
	if err := a.remove(ip); err != nil {
		return err
	}
	if uid := a.byIP[ip]; uid != "" && a.byUID[uid] == ip {
		delete(a.byUID, uid)
	}
	delete(a.byIP, ip)
	return nil
}

func (a *ipam) remove(ip netip.Addr) error {
	if err := os.Remove(filepath.Join(a.dir, ip.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podnet: release %s: %w", ip, err)
	}
	return syncDir(a.dir)
}

// owners lists every UID holding an address (in the range or not).
func (a *ipam) owners() []types.UID {
	seen := map[types.UID]bool{}
	var uids []types.UID
	for _, uid := range a.byIP {
		if uid != "" && !seen[uid] {
			seen[uid] = true
			uids = append(uids, uid)
		}
	}
	return uids
}

// strays lists the addresses whose files name no valid owner, and those
// an owner holds besides its address in the range, for Sweep.
func (a *ipam) strays() []netip.Addr {
	var ips []netip.Addr
	for ip, uid := range a.byIP {
		if uid == "" {
			ips = append(ips, ip)
			continue
		}
		if own, ok := a.byUID[uid]; ok && own != ip {
			ips = append(ips, ip)
		}
	}
	return ips
}

// removeTemps removes temporary files a crash left behind, for Sweep.
func (a *ipam) removeTemps() error {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return fmt.Errorf("podnet: IPAM directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(a.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("podnet: remove %s: %w", e.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// syncDir makes the directory's entries durable, so an allocation written
// (or released) survives a crash of the machine.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("podnet: sync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("podnet: sync %s: %w", dir, err)
	}
	return nil
}
