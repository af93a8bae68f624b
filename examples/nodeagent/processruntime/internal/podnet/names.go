package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// podIfName is the name of a pod's end of its veth pair, inside its own
// network namespace.
const podIfName = "eth0"

const (
	vethPrefix  = "pk"
	vethHexLen  = maxIfNameLen - len(vethPrefix)
	maxUIDBytes = 128
)

// vethName is the name of the host's end of a pod's veth pair: "pk" and
// 13 hex digits of a hash of the bridge's name and the UID, so it is the
// same in every run, fits IFNAMSIZ, and differs between two nodes of one
// host that run pods of one UID.
func vethName(bridge string, uid types.UID) string {
	sum := sha256.Sum256([]byte(bridge + "\x00" + string(uid)))
	return vethPrefix + hex.EncodeToString(sum[:])[:vethHexLen]
}

// isVethName reports whether name has the shape vethName gives.
func isVethName(name string) bool {
	if len(name) != maxIfNameLen || name[:len(vethPrefix)] != vethPrefix {
		return false
	}
	for _, c := range []byte(name[len(vethPrefix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkUID refuses a UID that cannot name a file of the state directory.
// Kubernetes UIDs are UUIDs; static pods' are hex digests.
func checkUID(uid types.UID) error {
	s := string(uid)
	if s == "" {
		return fmt.Errorf("podnet: empty pod UID")
	}
	if len(s) > maxUIDBytes {
		return fmt.Errorf("podnet: pod UID %.20q... is %d bytes; at most %d", s, len(s), maxUIDBytes)
	}
	if s == "." || s == ".." || s[0] == '.' {
		return fmt.Errorf("podnet: pod UID %q starts with '.'", s)
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("podnet: pod UID %q has %q; want letters, digits, '-', '_' or '.'", s, c)
		}
	}
	return nil
}
