//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/log"

	"github.com/winproc/winproc/integration/node"
)

// secrets are values a container is given that no log may hold: one for
// each place a user puts one.
type secrets struct {
	env, arg, credentialSpec, execArg, failedArg string
}

func newSecrets(t *testing.T) secrets {
	t.Helper()
	token := func(kind string) string {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return kind + "-" + hex.EncodeToString(b)
	}
	return secrets{token("envsecret"), token("argsecret"), token("gmsasecret"), token("execsecret"), token("failsecret")}
}

func (s secrets) all() []string {
	return []string{s.env, s.arg, s.credentialSpec, s.execArg, s.failedArg}
}

// TestNoSecretInLogs runs, at debug log level and in both sandbox modes,
// an ordinary pod's container with a secret in an environment value, a
// command-line argument and a gMSA credential spec, and a HostProcess
// pod's container with a secret in an environment value and an argument;
// execs a process with a secret argument in each; and starts a program
// that does not exist with a secret argument. Then no log of the shim
// (its lines in containerd's log, every panic.log), of winproc-snapshotter
// or of `winproc doctor` holds any of them.
func TestNoSecretInLogs(t *testing.T) {
	forEachSandboxer(t, noSecretInLogs)
}

func noSecretInLogs(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer, LogLevel: "debug"})
	importPodImages(t, n)
	importHostProcessImage(t, n)
	s := newSecrets(t)
	// The container's argument is a URL whose path is the secret: the
	// server answers with the path, so the log proves it arrived whole.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "path "+r.URL.Path) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	url := func(secret string) string { return "http://" + l.Addr().String() + "/" + secret }

	pods := []struct {
		name, podCfg, image, program string
		security                     map[string]any
	}{
		{"ordinary", podConfig(t, "secrets"), testAppImage, testApp, nil},
		{"hostprocess", hostProcessPodConfig(t), hostProcessImage, "winproc-testapp.exe", hostProcessSecurity(`NT AUTHORITY\SYSTEM`)},
	}
	for _, p := range pods {
		pod := runPodWith(t, n, p.name, p.podCfg)
		create := func(name string, args []string, security map[string]any) string {
			cfg := containerConfig(t, p.name+"-"+name, p.image, args, map[string]any{
				"envs":    []map[string]string{{"key": "API_TOKEN", "value": s.env}},
				"windows": security,
			})
			return lastLine(crictl(t, n, "create", pod, cfg, p.podCfg))
		}
		get := create("get", []string{p.program, "get", url(s.arg)}, p.security)
		crictl(t, n, "start", get)
		waitLog(t, n, get, "path /"+s.arg)

		sleeper := create("sleeper", []string{p.program, "sleep", "-seconds", "120"}, p.security)
		crictl(t, n, "start", sleeper)
		waitLog(t, n, sleeper, "ready")
		if out := crictl(t, n, "exec", "-s", sleeper, p.program, "get", url(s.execArg)); !strings.Contains(out, "path /"+s.execArg) {
			t.Errorf("%s: exec get printed %q", p.name, out)
		}
		missing := create("missing", []string{`C:\no-such-program.exe`, s.failedArg}, p.security)
		if out, err := n.Crictl(context.Background(), "start", missing); err == nil {
			t.Errorf("%s: a missing program started: %s", p.name, out)
		}
		if p.security == nil {
			// The emulation refuses gMSA at start, naming it; the spec
			// goes through the shim all the same.
			gmsa := create("gmsa", []string{p.program, "env"}, map[string]any{"security_context": map[string]any{
				"credential_spec": `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"` + s.credentialSpec + `"}}`,
			}})
			if out, err := n.Crictl(context.Background(), "start", gmsa); err != nil && (!strings.Contains(out, "gMSA") || strings.Contains(out, "DeadlineExceeded")) {
				t.Errorf("%s: start with a credential spec: %v\n%s", p.name, err, out)
			}
		}
		crictl(t, n, "stopp", pod)
		crictl(t, n, "rmp", pod)
	}
	requireNoPodLeft(t, n, "")

	logs := map[string]string{
		"containerd (the shims' lines)": shimLines(n.ContainerdLog()),
		"winproc-snapshotter":           n.SnapshotterLog(),
		"winproc doctor":                doctorLog(t, n),
	}
	for name, text := range panicLogs(t, n.Dir) {
		logs[name] = text
	}
	for name, text := range logs {
		for _, secret := range s.all() {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s holds the secret %s: %s", name, secret, lineAt(text, i))
			}
		}
	}
}

// shimLines are the lines of containerd's log that its shims wrote: a
// shim's log reaches containerd through the bundle's log pipe, and
// containerd writes it out as it came, with no fields of its own.
func shimLines(log string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(log, "\n") {
		if strings.Contains(line, "runtime=io.containerd.winproc.v2") || !strings.Contains(line, "msg=") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// doctorLog runs `winproc doctor` in this process with its log at debug
// level and returns its report and its log.
func doctorLog(t *testing.T, n *node.Node) string {
	// The doctor finds the shim as containerd does: on PATH.
	t.Setenv("PATH", bins+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	logger := log.L.Logger
	level, w := logger.GetLevel(), logger.Out
	logger.SetOutput(&out)
	if err := log.SetLevel("debug"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logger.SetOutput(w)
		logger.SetLevel(level)
	})
	r := runDoctor(t, doctorOptions(n))
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// panicLogs are the panic.log files under dir, by path.
func panicLogs(t *testing.T, dir string) map[string]string {
	logs := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "panic.log" {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				return rerr
			}
			logs[path] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// lineAt is the line of text that holds byte i.
func lineAt(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		return text[start:]
	}
	return text[start : i+end]
}
