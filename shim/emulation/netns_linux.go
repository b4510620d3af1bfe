//go:build linux

package emulation

import "strings"

// A Windows pod's compute systems share the network of its HNS namespace.
// On Linux, containerd's CRI gives a pod a network namespace (a bind-mounted
// file, set up by CNI) and sends its path where Windows sends the HNS
// namespace's GUID. The emulation starts every process of such a silo, its
// wineserver included (Wine's sockets are made by the server), inside that
// namespace (startProcess), so the pod's pause and containers share
// localhost and the pod's address, as on Windows.

// isNetNSPath tells a Linux network namespace path from an HNS namespace
// GUID.
func isNetNSPath(namespace string) bool { return strings.HasPrefix(namespace, "/") }
