//go:build linux

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"
)

func (d *demo) podNetwork(ctx context.Context) error {
	d.t.section("The pod's network")
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(d.podIP.String(), fmt.Sprint(d.port)))
	d.t.note("The app listens in the pod's namespace; the host reaches it at the pod's address (the way",
		"containerd 2.x on Windows port-forwards):")
	d.t.call("http.Get(" + strconv.Quote(url) + ")")
	body, err := httpGet(ctx, url)
	if err != nil {
		return err
	}
	d.t.output(body)
	if !strings.Contains(body, "hello from winproc-testapp") {
		return fmt.Errorf("the app at the pod's address answered %q", body)
	}

	local, err := freePort()
	if err != nil {
		return err
	}
	d.t.note("`crictl port-forward`: containerd's streaming server, built for Linux, dials localhost",
		"inside the pod's namespace.")
	display := d.t.shellLine([]string{d.tool("crictl"), "port-forward", d.pod, fmt.Sprintf("%d:%d", local, d.port)}) + " &"
	d.t.command(display)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	forward := exec.CommandContext(fctx, d.tool("crictl"), "port-forward", d.pod, fmt.Sprintf("%d:%d", local, d.port))
	forward.Dir, forward.Env = d.dir, d.env
	if err := forward.Start(); err != nil {
		return err
	}
	defer func() {
		cancel()
		forward.Wait()
	}()
	localURL := fmt.Sprintf("http://127.0.0.1:%d/", local)
	d.t.call("http.Get(" + strconv.Quote(localURL) + ")")
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err = httpGet(ctx, localURL)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("through crictl port-forward: %w", err)
	}
	d.t.output(body)
	return nil
}

// httpGet returns the body at url.
func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (d *demo) portForward(ctx context.Context) error {
	d.t.section("Port-forward through wincat in the pod's sandbox")
	d.t.note(
		"containerd 1.7's port-forward on Windows: exec `wincat.exe 127.0.0.1 PORT` in the sandbox (the",
		"pause container) and carry the connection on the exec's stdin and stdout. containerd 2.x",
		"keeps no container record for a sandbox the shim owns (`ctr tasks ls` lists its pause task,",
		"but `ctr tasks exec` answers \"not found\"), so the exec goes to the shim's task API",
		"directly, on the ttrpc socket the container's bootstrap.json names.",
	)
	if _, err := d.sh(ctx, "", "cat", d.bootstrapPath()); err != nil {
		return err
	}
	ctx = namespaces.WithNamespace(ctx, namespace)
	shimConn, err := d.node.DialShim(ctx, d.app)
	if err != nil {
		return err
	}
	defer shimConn.Close()
	shim := taskAPI.NewTTRPCTaskClient(shimConn)

	fifos, err := cio.NewFIFOSetInDir(filepath.Join(d.dir, "fifo"), "wincat", false)
	if err != nil {
		return err
	}
	stdio, err := cio.NewDirectIO(ctx, fifos)
	if err != nil {
		return err
	}
	defer stdio.Close()
	procSpec, err := json.Marshal(&specs.Process{Args: []string{wincatExe, "127.0.0.1", fmt.Sprint(d.port)}, Cwd: `C:\`})
	if err != nil {
		return err
	}
	d.t.call(fmt.Sprintf("shim.Exec(ctx, {ID: %q, ExecID: \"port-forward\", Spec: {Args: [%s 127.0.0.1 %d]}, Stdin, Stdout})", short(d.pod), wincatExe, d.port))
	if _, err := shim.Exec(ctx, &taskAPI.ExecProcessRequest{
		ID: d.pod, ExecID: "port-forward", Stdin: fifos.Stdin, Stdout: fifos.Stdout,
		Spec: &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Process", Value: procSpec},
	}); err != nil {
		return err
	}
	d.t.call(`shim.Start(ctx, {ID: pod, ExecID: "port-forward"}); stdin <- "GET / HTTP/1.0\r\n\r\n"; close(stdin); read stdout`)
	if _, err := shim.Start(ctx, &taskAPI.StartRequest{ID: d.pod, ExecID: "port-forward"}); err != nil {
		return err
	}
	if _, err := io.WriteString(stdio.Stdin, "GET / HTTP/1.0\r\nHost: demo\r\n\r\n"); err != nil {
		return err
	}
	stdio.Stdin.Close()
	answer, err := io.ReadAll(stdio.Stdout)
	if err != nil {
		return err
	}
	d.t.output(string(answer))
	wait, err := shim.Wait(ctx, &taskAPI.WaitRequest{ID: d.pod, ExecID: "port-forward"})
	if err != nil {
		return err
	}
	d.t.call(fmt.Sprintf("shim.Wait(ctx, {ID: pod, ExecID: \"port-forward\"}) -> exit status %d; shim.Delete(...)", wait.ExitStatus))
	if _, err := shim.Delete(ctx, &taskAPI.DeleteRequest{ID: d.pod, ExecID: "port-forward"}); err != nil {
		return err
	}
	if !strings.Contains(string(answer), "hello from winproc-testapp") || wait.ExitStatus != 0 {
		return fmt.Errorf("through wincat: exit %d, answer %q", wait.ExitStatus, answer)
	}
	d.t.note("The app logged the request that came through wincat:")
	_, err = d.sh(ctx, "", d.tool("crictl"), "logs", "--tail", "1", d.app)
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
