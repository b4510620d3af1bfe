//go:build linux

package winenode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/containerdnames"
)

// The stock kubelet drives winproc: kubelet.exe, standalone, runs static
// pods against containerd.exe's CRI with winproc as the node's default
// handler, as a node runs its DaemonSets and workloads. A HostProcess pod
// (as kube-proxy or a CNI agent runs) and an ordinary pod (HCS, the
// stand-in's), each with an init container whose termination message the
// kubelet reads from the file it mounts into every container (a file
// binding for the HostProcess one), a server behind an HTTP readiness
// probe and an exec liveness probe; logs through the kubelet; a container
// restarted when its liveness probe fails; the manifests removed, nothing
// left.
func TestKubeletStaticPods(t *testing.T) {
	exe := filepath.Join(bins.Containerd, "kubelet.exe")
	n := startNodeWith(t, Options{Standins: true, DefaultHandler: true})
	if _, err := os.Stat(exe); err != nil {
		t.Fatalf("no kubelet.exe (build/tools.sh builds it): %v", err)
	}
	importTree(t, n, agentImage, "10.0.17763.1", "winproc-testapp.exe")
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	k := n.StartKubelet(exe, bins.Standins, freePort(t))

	agent, web := staticPod{k: k, name: "agent", namespace: "kube-system"}, staticPod{k: k, name: "web", namespace: "default"}
	agentPort, webPort := freePort(t), freePort(t)
	alive := map[*staticPod]string{&agent: `C:\probes\agent`, &web: `C:\hostdata\web\alive`}
	for _, f := range alive {
		n.writeFile(f, "alive")
	}
	n.writeFile(KubeletManifests+`\agent.json`, agentManifest(agentPort))
	n.writeFile(KubeletManifests+`\web.json`, webManifest(webPort))

	for _, p := range []*staticPod{&agent, &web} {
		s := p.waitReady(t, 4*time.Minute)
		if got := s.initMessage(); got != p.name+"-set-up" {
			t.Errorf("%s: the init container's termination message through /pods is %q, want %q", p.name, got, p.name+"-set-up")
		}
		if c := s.container("server"); c.RestartCount != 0 {
			t.Errorf("%s: the server restarted %d times before its liveness probe failed", p.name, c.RestartCount)
		}
		logs, err := k.Get(fmt.Sprintf("/containerLogs/%s/%s/server", p.namespace, p.podName()))
		if err != nil || !strings.Contains(logs, "listening") {
			t.Errorf("%s: the server's logs through the kubelet: %v\n%s", p.name, err, logs)
		}
		// The readiness probe's requests reached the server.
		if !strings.Contains(logs, "GET /healthz") {
			t.Errorf("%s: no readiness probe in the server's log:\n%s", p.name, logs)
		}
	}

	writeKubeletCorpus(t, n, &web)
	checkStatsSummary(t, k, &agent, &web)

	// A failing liveness probe: the kubelet kills the container and
	// starts it again, and it is ready again. First the probe passes (the
	// kubelet's own count of its results, /metrics/probes): an exec that
	// never returns would time out instead.
	for _, p := range []*staticPod{&agent, &web} {
		waitForWithin(t, p.name+": a liveness probe passed", time.Minute, func() bool {
			return p.probes(t, "Liveness", "successful") >= 1
		})
		if c := p.waitReady(t, time.Minute).container("server"); c.RestartCount != 0 {
			t.Errorf("%s: the server restarted %d times before its liveness probe failed", p.name, c.RestartCount)
		}
		if err := os.Remove(n.Path(alive[p])); err != nil {
			t.Fatal(err)
		}
		p.waitFor(t, "a restart of the server", 3*time.Minute, func(s podStatus) bool {
			return s.container("server").RestartCount >= 1
		})
		n.writeFile(alive[p], "alive")
		p.waitReady(t, 3*time.Minute)
	}

	// Removing the manifests ends the pods gracefully: the servers stop on
	// the kubelet's stop well within their grace period (a stop that only
	// ended at the deadline would take it all). The kubelet's garbage
	// collection then removes their containers and sandboxes.
	for _, m := range []string{"agent.json", "web.json"} {
		if err := os.Remove(n.Path(KubeletManifests + `\` + m)); err != nil {
			t.Fatal(err)
		}
	}
	waitForWithin(t, "the servers' graceful stop", gracePeriod/2, func() bool {
		running, _, err := n.Crictl("ps", "-q")
		return err == nil && strings.TrimSpace(running) == ""
	})
	waitForWithin(t, "the pods' removal", 4*time.Minute, func() bool {
		pods, _, err := n.Crictl("pods", "-q")
		containers, _, err2 := n.Crictl("ps", "-a", "-q")
		return err == nil && err2 == nil && strings.TrimSpace(pods) == "" && strings.TrimSpace(containers) == ""
	})
	if out, err := k.Get("/pods"); err != nil || strings.Contains(out, `"name":"agent-`) || strings.Contains(out, `"name":"web-`) {
		t.Errorf("the kubelet's /pods after the manifests went: %v\n%s", err, out)
	}
	n.checkNothingLeft()
	for _, dir := range []string{containerdnames.ShimStateDirWindows, containerdnames.JobContainerStateDirWindows} {
		records, _ := filepath.Glob(filepath.Join(n.Path(dir), "*.json"))
		if len(records) != 0 {
			t.Errorf("records left in %s: %v", dir, records)
		}
	}
}

// checkStatsSummary checks that the kubelet's /stats/summary lists the
// pods, with their containers' CPU and memory (the figures, from CRI's
// Windows statistics, are checked on the crictl tiers).
func checkStatsSummary(t *testing.T, k *Kubelet, pods ...*staticPod) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body, err := k.Get("/stats/summary")
		if err == nil && summaryLists(body, pods) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet's /stats/summary does not list the pods' servers in 2 minutes: %v\n%s", err, body)
		}
		time.Sleep(2 * time.Second)
	}
}

// summaryLists reports whether the summary body lists each pod's server
// with its CPU and memory.
func summaryLists(body string, pods []*staticPod) bool {
	var summary struct {
		Pods []struct {
			PodRef     struct{ Name, Namespace string } `json:"podRef"`
			Containers []struct {
				Name   string           `json:"name"`
				CPU    *json.RawMessage `json:"cpu"`
				Memory *json.RawMessage `json:"memory"`
			} `json:"containers"`
		} `json:"pods"`
	}
	if json.Unmarshal([]byte(body), &summary) != nil {
		return false
	}
	found := 0
	for _, p := range pods {
		for _, s := range summary.Pods {
			for _, c := range s.Containers {
				if s.PodRef.Name == p.podName() && s.PodRef.Namespace == p.namespace && c.Name == "server" && c.CPU != nil && c.Memory != nil {
					found++
				}
			}
		}
	}
	return found == len(pods)
}

// agentManifest is a HostProcess DaemonSet's pod as a static pod: the
// node's network, the inherit-user annotation, the program found on the
// container's rootfs.
func agentManifest(port int) string {
	return manifest{
		name: "agent", namespace: "kube-system", annotations: inheritUser,
		spec: map[string]any{
			"hostNetwork": true,
			"securityContext": map[string]any{"windowsOptions": map[string]any{
				"hostProcess": true, "runAsUserName": `NT AUTHORITY\SYSTEM`,
			}},
		},
		image: agentImage, program: "winproc-testapp.exe", port: port,
		terminationLog: `%CONTAINER_SANDBOX_MOUNT_POINT%\dev\termination-log`,
		aliveFile:      `C:\probes\agent`,
	}.json()
}

// webManifest is an ordinary pod, its liveness file on a hostPath volume.
func webManifest(port int) string {
	volume := map[string]any{"name": "data", "hostPath": map[string]any{"path": `C:\hostdata\web`, "type": "Directory"}}
	return manifest{
		name: "web", namespace: "default",
		spec:  map[string]any{"volumes": []any{volume}},
		image: appImage, program: `C:\winproc-testapp.exe`, port: port,
		terminationLog: `C:\dev\termination-log`,
		aliveFile:      `C:\data\alive`,
		mounts:         []any{map[string]any{"name": "data", "mountPath": `C:\data`}},
	}.json()
}

// gracePeriod is the static pods' terminationGracePeriodSeconds.
const gracePeriod = 2 * time.Minute

// manifest is a static pod's manifest: an init container writing its
// termination message to terminationLog, and a server on port with an
// HTTP readiness probe and an exec liveness probe reading aliveFile.
type manifest struct {
	name, namespace                           string
	annotations                               map[string]string
	spec                                      map[string]any
	image, program, terminationLog, aliveFile string
	port                                      int
	mounts                                    []any
}

func (m manifest) json() string {
	spec := m.spec
	spec["terminationGracePeriodSeconds"] = int(gracePeriod / time.Second)
	spec["initContainers"] = []any{map[string]any{
		"name": "setup", "image": m.image, "imagePullPolicy": "Never",
		"command": []string{"cmd", "/c", "echo", m.name + "-set-up>" + m.terminationLog},
	}}
	spec["containers"] = []any{map[string]any{
		"name": "server", "image": m.image, "imagePullPolicy": "Never",
		"command":      []string{m.program, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", m.port)},
		"volumeMounts": m.mounts,
		"readinessProbe": map[string]any{
			"httpGet":       map[string]any{"host": "127.0.0.1", "port": m.port, "path": "/healthz"},
			"periodSeconds": 2,
		},
		"livenessProbe": map[string]any{
			"exec":           map[string]any{"command": []string{"cmd", "/c", "type", m.aliveFile}},
			"periodSeconds":  3,
			"timeoutSeconds": 5,
		},
	}}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": m.name, "namespace": m.namespace, "annotations": m.annotations},
		"spec":     spec,
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// staticPod is a static pod of the kubelet, read back through its /pods.
type staticPod struct {
	k               *Kubelet
	name, namespace string
}

// probes is the kubelet's count of the server's probes of kind with
// result (its prober_probe_total).
func (p *staticPod) probes(t *testing.T, kind, result string) int {
	t.Helper()
	body, err := p.k.Get("/metrics/probes")
	if err != nil {
		t.Fatal(err)
	}
	labels := []string{`container="server"`, fmt.Sprintf(`namespace=%q`, p.namespace), fmt.Sprintf(`pod=%q`, p.podName()),
		fmt.Sprintf(`probe_type=%q`, kind), fmt.Sprintf(`result=%q`, result)}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "prober_probe_total{") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		var n float64
		if f := strings.Fields(line); all && len(f) == 2 {
			fmt.Sscan(f[1], &n)
			return int(n)
		}
	}
	return 0
}

// podName is the name the kubelet gives a static pod: its manifest's,
// then the node's.
func (p *staticPod) podName() string { return p.name + "-" + KubeletNodeName }

// podStatus is the part of a pod's status the tier reads.
type podStatus struct {
	Conditions []struct {
		Type, Status string
	} `json:"conditions"`
	InitContainerStatuses []containerStatus `json:"initContainerStatuses"`
	ContainerStatuses     []containerStatus `json:"containerStatuses"`
}

type containerStatus struct {
	Name         string `json:"name"`
	Ready        bool   `json:"ready"`
	RestartCount int    `json:"restartCount"`
	State        struct {
		Terminated *struct {
			ExitCode int    `json:"exitCode"`
			Message  string `json:"message"`
		} `json:"terminated"`
	} `json:"state"`
}

// initMessage is the termination message of the pod's one init
// container, once it ended.
func (s podStatus) initMessage() string {
	if len(s.InitContainerStatuses) != 1 || s.InitContainerStatuses[0].State.Terminated == nil {
		return fmt.Sprintf("(no one init container ended: %+v)", s.InitContainerStatuses)
	}
	return strings.TrimSpace(s.InitContainerStatuses[0].State.Terminated.Message)
}

func (s podStatus) ready() bool {
	for _, c := range s.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

func (s podStatus) container(name string) containerStatus {
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return containerStatus{}
}

// status is the pod's status as the kubelet's /pods gives it, false when
// the kubelet lists no such pod.
func (p *staticPod) status(t *testing.T) (podStatus, bool) {
	body, err := p.k.Get("/pods")
	if err != nil {
		t.Logf("%v", err)
		return podStatus{}, false
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
			Status   podStatus                        `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("the kubelet's /pods: %v\n%s", err, body)
	}
	for _, it := range list.Items {
		if it.Metadata.Name == p.podName() && it.Metadata.Namespace == p.namespace {
			return it.Status, true
		}
	}
	return podStatus{}, false
}

// waitFor waits until the pod's status satisfies ok, and returns it.
func (p *staticPod) waitFor(t *testing.T, what string, within time.Duration, ok func(podStatus) bool) podStatus {
	t.Helper()
	var s podStatus
	waitForWithin(t, p.name+": "+what, within, func() bool {
		var found bool
		s, found = p.status(t)
		return found && ok(s)
	})
	return s
}

func (p *staticPod) waitReady(t *testing.T, within time.Duration) podStatus {
	t.Helper()
	return p.waitFor(t, "Ready", within, podStatus.ready)
}

// waitForWithin is waitFor with a deadline of within.
func waitForWithin(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in %v", what, within)
		}
		time.Sleep(time.Second)
	}
}

// writeFile writes the node's file p (a Windows path on C:), making its
// directory.
func (n *Node) writeFile(p, content string) {
	f := n.Path(p)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}
