//go:build linux

package emulatednode

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
)

// The node's pod network: containerd's CRI gives each pod that is not on
// the host's network a network namespace and runs CNI's bridge plugin (with
// host-local addresses) in it, as a Linux node does; the shim's emulation
// starts the pod's Wine processes inside it. Each node has a bridge and a
// /24 of its own, derived from Dir, so that nodes running at once (tests,
// the demo) do not share one.

// cniNetwork is the name of the node's CNI network.
const cniNetwork = "winproc-pods"

// CNIBinDir is where `make tools` puts the CNI plugins, below Tools.
const CNIBinDir = "cni"

// bridge is the node's bridge: named after a hash of Dir.
func (n *Node) bridge() string {
	h := sha256.Sum256([]byte(n.Dir))
	return fmt.Sprintf("wp%x", h[:6])
}

// choosePodSubnet returns the first /24 of 10.64.0.0/10, from one picked by
// a hash of Dir on, that no interface of this machine has an address in.
func (n *Node) choosePodSubnet() (*net.IPNet, error) {
	h := sha256.Sum256([]byte("subnet " + n.Dir))
	used, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	const subnets = 1 << 14 // the /24s of a /10
	start := int(h[0])<<8 | int(h[1])
	for i := range subnets {
		k := (start + i) % subnets
		subnet := &net.IPNet{IP: net.IPv4(10, byte(64+k>>8), byte(k), 0).To4(), Mask: net.CIDRMask(24, 32)}
		if !overlaps(subnet, used) {
			return subnet, nil
		}
	}
	return nil, errors.New("no free /24 in 10.64.0.0/10 for the pod network")
}

func overlaps(subnet *net.IPNet, addrs []net.Addr) bool {
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
			return true
		}
	}
	return false
}

// cniConfDir holds the node's CNI network config.
func (n *Node) cniConfDir() string { return filepath.Join(n.Dir, "cni", "net.d") }

// writeCNIConfig writes the node's network config for containerd's CRI: a
// bridge that is the pods' gateway (so the host reaches pod addresses),
// without masquerading (pods need reach only the host), with host-local's
// leases below Dir.
func (n *Node) writeCNIConfig() error {
	subnet, err := n.choosePodSubnet()
	if err != nil {
		return err
	}
	n.PodSubnet = subnet
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      n.bridge(),
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": subnet.String()}}},
				"dataDir": filepath.Join(n.Dir, "cni", "ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.cniConfDir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.cniConfDir(), "10-"+cniNetwork+".conflist"), b, 0o644)
}

// removeBridge deletes the node's bridge, which the bridge plugin leaves
// when the last pod goes.
func (n *Node) removeBridge() error {
	link, err := netlink.LinkByName(n.bridge())
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil
	}
	if err != nil {
		return err
	}
	return netlink.LinkDel(link)
}
