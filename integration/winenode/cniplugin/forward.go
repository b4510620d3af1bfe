//go:build windows

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// stateDir holds a file per pod with mapped ports: the forwarder's
// process id.
var stateDir = filepath.Join(os.Getenv("ProgramData"), "winproc-test-cni")

func stateFile(id string) string { return filepath.Join(stateDir, id+".pid") }

// mapPorts starts the pod's forwarder for its TCP mappings with a host
// port; a mapping without one needs nothing (the pod's address is
// reachable as it is).
func mapPorts(id string, mappings []portMapping) error {
	var args []string
	for _, m := range mappings {
		if m.HostPort == 0 {
			continue
		}
		if p := strings.ToLower(m.Protocol); p != "" && p != "tcp" {
			return fmt.Errorf("port mapping %d/%s: the test plugin maps TCP only", m.HostPort, m.Protocol)
		}
		host := m.HostIP
		if host == "" {
			host = "0.0.0.0"
		}
		args = append(args, fmt.Sprintf("%s:%d=%s:%d", host, m.HostPort, podIP, m.ContainerPort))
	}
	if len(args) == 0 {
		return nil
	}
	if id == "" {
		return fmt.Errorf("ADD with port mappings but no CNI_CONTAINERID")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("port mappings' state: %w", err)
	}
	// Ready is the forwarder's stdout closing after it listens on every
	// port; it outlives this process, detached from its console so the
	// pod's console events do not reach it.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, append([]string{"forward"}, args...)...)
	cmd.Stdout = w
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.DETACHED_PROCESS | windows.CREATE_NEW_PROCESS_GROUP}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the port forwarder: %w", err)
	}
	w.Close()
	msg, _ := io.ReadAll(r)
	if string(msg) != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("map ports %v: %s", args, msg)
	}
	if err := os.WriteFile(stateFile(id), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("record the port forwarder: %w", err)
	}
	return cmd.Process.Release()
}

// unmapPorts stops the pod's forwarder, if it has one; DEL may come more
// than once.
func unmapPorts(id string) error {
	b, err := os.ReadFile(stateFile(id))
	if errors.Is(err, os.ErrNotExist) || id == "" {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", stateFile(id), err)
	}
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
		p.Wait()
	}
	return os.Remove(stateFile(id))
}

// forwardMain listens on each HOST:PORT=TARGET:PORT and relays its
// connections to the target until killed.
func forwardMain(args []string) int {
	var listeners []net.Listener
	for _, a := range args {
		from, to, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Printf("bad mapping %q\n", a)
			return 2
		}
		l, err := net.Listen("tcp", from)
		if err != nil {
			fmt.Printf("listen on %s: %v\n", from, err)
			return 1
		}
		listeners = append(listeners, l)
		go serve(l, to)
	}
	fmt.Println("ready")
	os.Stdout.Close()
	select {}
}

func serve(l net.Listener, to string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go relay(c, to)
	}
}

func relay(c net.Conn, to string) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	t, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		return
	}
	defer t.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(t, c)
		t.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, t)
	c.(*net.TCPConn).CloseWrite()
	wg.Wait()
}
