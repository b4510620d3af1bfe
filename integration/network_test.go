//go:build linux

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
)

// podIP is the pod's address as CRI reports it.
func podIP(t *testing.T, n *node.Node, pod string) net.IP {
	t.Helper()
	var st struct {
		Status struct {
			Network struct{ IP string } `json:"network"`
		} `json:"status"`
	}
	crictlJSON(t, n, &st, "inspectp", "-o", "json", pod)
	ip := net.ParseIP(st.Status.Network.IP)
	if ip == nil {
		t.Fatalf("pod %s has no address: %q", pod, st.Status.Network.IP)
	}
	return ip
}

// Pods with networks of their own, as a Windows node gives them through
// its CNI: containerd makes each pod a network namespace and the node's
// bridge plugin gives it an address; every process of the pod's compute
// systems runs in that namespace. So the containers of one pod share
// localhost and the pod's address, the host reaches the pod at that
// address, port-forward reaches it through the namespace, and nothing of
// the pod listens on the host.
func TestPodNetwork(t *testing.T) {
	forEachSandboxer(t, podNetwork)
}

func podNetwork(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer})
	importPodImages(t, n)
	cfg := networkedPodConfig(t, "net-a")
	podA := runPodWith(t, n, "net-a", cfg)
	podB := runPodWith(t, n, "net-b", networkedPodConfig(t, "net-b"))
	ipA, ipB := podIP(t, n, podA), podIP(t, n, podB)
	if !n.PodSubnet.Contains(ipA) || !n.PodSubnet.Contains(ipB) || ipA.Equal(ipB) {
		t.Fatalf("pod addresses %s and %s; want two different ones in %s", ipA, ipB, n.PodSubnet)
	}

	// A port free on the host: the app listens on it in the pod only.
	port := freePort(t)
	server := lastLine(crictl(t, n, "create", podA,
		containerConfig(t, "server", testAppImage, []string{testApp, "serve", "-addr", fmt.Sprintf("0.0.0.0:%d", port)}, nil), cfg))
	crictl(t, n, "start", server)
	client := lastLine(crictl(t, n, "create", podA,
		containerConfig(t, "client", testAppImage, []string{testApp, "sleep", "-seconds", "0"}, nil), cfg))
	crictl(t, n, "start", client)
	waitLog(t, n, server, "listening on")
	waitLog(t, n, client, "ready")

	// Another container of the pod, over localhost.
	if out := crictl(t, n, "exec", "-s", client, testApp, "get", fmt.Sprintf("http://127.0.0.1:%d/", port)); !strings.Contains(out, "hello from winproc-testapp") {
		t.Errorf("from the other container over localhost: %q", out)
	}
	// The host, at the pod's address.
	if body := get(t, fmt.Sprintf("http://%s/", net.JoinHostPort(ipA.String(), fmt.Sprint(port)))); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("from the host at the pod's address: %q", body)
	}
	// Not on the host's own network.
	quick := &http.Client{Timeout: 2 * time.Second}
	if resp, err := quick.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
		resp.Body.Close()
		t.Errorf("the pod's app answers on the host's localhost")
	}

	// port-forward: containerd's streaming server dials localhost inside
	// the pod's namespace.
	if body := getThroughPortForward(t, n, podA, port); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("through port-forward: %q", body)
	}

	crictl(t, n, "stop", "-t", "10", server, client)
	crictl(t, n, "rm", server, client)
	crictl(t, n, "stopp", podA, podB)
	crictl(t, n, "rmp", podA, podB)
	requireNoPodLeft(t, n, podA)
	requireNoPodLeft(t, n, podB)
	// containerd removes the pods' namespaces with them.
	if left, _ := os.ReadDir(filepath.Join(n.Dir, "state", "netns")); len(left) > 0 {
		t.Errorf("network namespaces left: %v", left)
	}
}
