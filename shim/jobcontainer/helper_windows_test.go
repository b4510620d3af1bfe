//go:build windows

package jobcontainer

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// The Windows tests run real processes in job objects: this test binary
// itself, copied into each container's rootfs as app.exe and started with
// helperEnv set, is the program. Its commands:
//
//	exit N         exits with N (any 32-bit value, 0x... allowed)
//	env            prints its environment, sorted, then cwd=<directory>
//	echo           copies stdin to stdout
//	console N      prints "ready", then exits with N at a console event
//	sleep          sleeps with no console handler of its own
//	spawn          starts a child that starts a grandchild (both sleep),
//	               prints "child <pid>" and "grandchild <pid>", sleeps
//	alloc MB       commits MB MiB: exits 0, or 3 when refused
//	breakaway      puts itself in a job without breakaway, starts a process
//	               through the binding, prints the start's error
//	stdhandles F   writes "tty-output" to stdout and stderr, and what its
//	               standard handles are to the file F
const helperEnv = "WINPROC_JOBCONTAINER_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(args []string) int {
	if len(args) == 0 {
		return 2
	}
	switch args[0] {
	case "exit":
		n, err := strconv.ParseUint(args[1], 0, 32)
		if err != nil {
			return 2
		}
		os.Exit(int(n))
	case "env":
		env := os.Environ()
		sort.Strings(env)
		for _, kv := range env {
			fmt.Println(kv)
		}
		wd, _ := os.Getwd()
		fmt.Println("cwd=" + wd)
	case "echo":
		io.Copy(os.Stdout, os.Stdin)
	case "console":
		code, _ := strconv.Atoi(args[1])
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		os.Exit(code)
	case "sleep":
		time.Sleep(time.Hour)
	case "spawn", "spawn-child":
		next, label := "spawn-child", "child"
		if args[0] == "spawn-child" {
			next, label = "sleep", "grandchild"
		}
		self, _ := os.Executable()
		cmd := exec.Command(self, next)
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			return 4
		}
		fmt.Printf("%s %d\n", label, cmd.Process.Pid)
		time.Sleep(time.Hour)
	case "stdhandles":
		return stdHandles(args[1])
	case "breakaway":
		return startInJob()
	case "alloc":
		mb, _ := strconv.Atoi(args[1])
		a, err := windows.VirtualAlloc(0, uintptr(mb)<<20, windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
		if err != nil || a == 0 {
			fmt.Println("refused:", err)
			return 3
		}
		fmt.Println("committed")
		if len(args) > 2 && args[2] == "hold" {
			time.Sleep(time.Hour)
		}
	default:
		return 2
	}
	return 0
}

// lines reads r's lines into a channel.
func lines(r io.Reader) <-chan string {
	c := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			c <- s.Text()
		}
		close(c)
	}()
	return c
}
