//go:build linux

package winenode

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
)

// Where the node keeps the kubelet's things, as a Windows node's
// install scripts lay them out (sig-windows-tools' C:\k).
const (
	KubeletDir       = `C:\k`
	KubeletManifests = KubeletDir + `\manifests`
	KubeletRoot      = `C:\var\lib\kubelet`
	// KubeletPodLogs is the kubelet's podLogsDir; its symbolic links are
	// in the fixed C:\var\log\containers.
	KubeletPodLogs = `C:\var\log\pods`
	// KubeletNodeName is the node's name: a static pod's name is its
	// manifest's, "-", and this.
	KubeletNodeName = "winnode"
	// The registry values the kubelet's getMachineInfo reads
	// (k8s.io/kubernetes pkg/kubelet/winstats getSystemUUID, getBootID),
	// which Windows sets at boot and Wine lacks: a machine's SMBIOS UUID
	// in braces, and a count of boots.
	kubeletSystemUUID = "{4B1D0000-0000-4000-8000-00000000C0DE}"
	kubeletBootID     = 1
)

// Kubelet is the stock kubelet (kubelet.exe, build/tools.sh) running on
// the node standalone: no API server, its pods the static pods of
// KubeletManifests, its runtime containerd.exe's CRI.
type Kubelet struct {
	n      *Node
	port   int
	log    syncbuffer.Buffer
	stop   func()
	client *http.Client
}

// StartKubelet installs kubelet.exe (the file exe) and the stand-in
// pdh.dll of standins, and starts the kubelet, serving on 127.0.0.1:port;
// the test's cleanup stops it.
func (n *Node) StartKubelet(exe, standins string, port int) *Kubelet {
	t := n.t
	t.Helper()
	for _, d := range []string{KubeletManifests, KubeletRoot, KubeletPodLogs, `C:\var\log\containers`} {
		if err := os.MkdirAll(n.Path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.copyFile(exe, n.Path(KubeletDir+`\kubelet.exe`), 0o755)
	n.copyFile(filepath.Join(standins, KubeletStandin), n.Path(`C:\windows\system32\`+KubeletStandin), 0o644)
	n.importRegistry(kubeletRegistry())
	config, err := json.Marshal(kubeletConfig(port))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.Path(KubeletDir+`\config.json`), config, 0o644); err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{n: n, port: port, client: &http.Client{
		Timeout: 30 * time.Second,
		// The kubelet's self-signed serving certificate, on loopback.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}}
	k.start()
	t.Cleanup(func() {
		k.stop()
		if t.Failed() {
			t.Logf("kubelet.exe's log:\n%s", tail(k.log.String(), 300))
		}
	})
	k.waitHealthy()
	return k
}

// kubeletRegistry is what the node's registry needs for the kubelet:
// getMachineInfo's values, and Wine told to load the stand-in pdh.dll
// (native) rather than its own (builtin) for kubelet.exe alone.
func kubeletRegistry() []string {
	return []string{
		`[HKEY_LOCAL_MACHINE\SYSTEM\HardwareConfig]`,
		`"LastConfig"="` + kubeletSystemUUID + `"`,
		`[HKEY_LOCAL_MACHINE\SYSTEM\CurrentControlSet\Control\Session Manager\Memory Management\PrefetchParameters]`,
		fmt.Sprintf(`"BootId"=dword:%08x`, kubeletBootID),
		`[HKEY_CURRENT_USER\Software\Wine\AppDefaults\kubelet.exe\DllOverrides]`,
		`"pdh"="native"`,
	}
}

// kubeletConfig is the kubelet's KubeletConfiguration: standalone, its
// pods static, serving on loopback to anyone (no API server to ask), with
// what the kubelet refuses on Windows off (cgroups, node allocatable
// enforcement) and its log directory in the node.
func kubeletConfig(port int) map[string]any {
	return map[string]any{
		"kind":                     "KubeletConfiguration",
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"staticPodPath":            KubeletManifests,
		"fileCheckFrequency":       "1s",
		"syncFrequency":            "10s",
		"containerRuntimeEndpoint": CRIEndpoint,
		"imageServiceEndpoint":     CRIEndpoint,
		"runtimeRequestTimeout":    "2m",
		"address":                  "127.0.0.1",
		"port":                     port,
		"readOnlyPort":             0,
		"healthzPort":              0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"cgroupsPerQOS":               false,
		"enforceNodeAllocatable":      []string{},
		"podLogsDir":                  KubeletPodLogs,
		"resolvConf":                  "",
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "0%"},
		"shutdownGracePeriod":         "0s",
	}
}

// start starts kubelet.exe in the node's C:\, so that the kubelet's Unix
// paths (/var/log/containers) land in the node, not on the Linux host.
func (k *Kubelet) start() {
	n := k.n
	ctx, cancel := context.WithCancel(context.Background())
	cmd := winetest.Command(ctx, n.t, n.prefix, KubeletDir+`\kubelet.exe`,
		"--config", KubeletDir+`\config.json`,
		"--hostname-override", KubeletNodeName,
		"--root-dir", KubeletRoot,
		"--v", "2")
	cmd.Dir = n.Path(`C:\`)
	cmd.Stdout, cmd.Stderr = &k.log, &k.log
	if err := cmd.Start(); err != nil {
		cancel()
		n.t.Fatalf("start kubelet.exe: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	k.stop = func() {
		// CTRL_C, as Background does: the kubelet ends on it.
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
	}
}

// waitHealthy waits until the kubelet answers /healthz.
func (k *Kubelet) waitHealthy() {
	t := k.n.t
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body, err := k.Get("/healthz")
		if err == nil && body == "ok" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubelet.exe does not answer /healthz in 2 minutes: %v %q\n%s", err, body, tail(k.log.String(), 100))
		}
		time.Sleep(time.Second)
	}
}

// Get is the body the kubelet answers path with; an answer but 200 is an
// error.
func (k *Kubelet) Get(path string) (string, error) {
	resp, err := k.client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", k.port, path))
	if err != nil {
		return "", fmt.Errorf("kubelet GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("kubelet GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), err
}

// Log is what the kubelet logged so far.
func (k *Kubelet) Log() string { return k.log.String() }

// copyFile copies the Linux file src to dst.
func (n *Node) copyFile(src, dst string, mode os.FileMode) {
	b, err := os.ReadFile(src)
	if err != nil {
		n.t.Fatalf("copy %s: %v", src, err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		n.t.Fatal(err)
	}
}

// importRegistry imports lines, a .reg file's keys and values, into the
// node's registry with regedit, as setHostBuild does.
func (n *Node) importRegistry(lines []string) {
	reg := strings.Join(append([]string{"Windows Registry Editor Version 5.00", ""}, lines...), "\r\n") + "\r\n"
	file := filepath.Join(n.prefix, "drive_c", "kubelet.reg")
	if err := os.WriteFile(file, []byte(reg), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if out, err := n.Run(`C:\windows\regedit.exe`, "/S", `C:\kubelet.reg`); err != nil {
		n.t.Fatalf("import the kubelet's registry values: %v\n%s", err, out)
	}
}
