package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Each script critest v1.36.0 sends (pkg/validate/consts.go,
// pkg/framework/util.go), and what Windows PowerShell writes for it.
func TestScripts(t *testing.T) {
	dir, empty := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "flag"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, script string
		code         int
		stdout       []string // substrings, in order
		ran          string   // the external command run
	}{
		{"echo hello", "echo hello", 0, []string{"hello\r\n"}, ""},
		{"echo quoted", "echo 'hello World'", 0, []string{"hello World\r\n"}, ""},
		{"computername", "$env:computername", 0, []string{"TEST-HOSTNAME\r\n"}, ""},
		{"sleep no match", "get-process | findstr sleep; exit 0", 0, nil, ""},
		{"get-process", "get-process | findstr pause", 0, []string{"      4 pause\r\n"}, ""},
		{"findstr none", "get-process | findstr nothing", 1, nil, ""},
		{"ls", "ls " + dir, 0, []string{"Directory: " + dir, "flag"}, ""},
		{"ls empty", "ls " + empty, 0, nil, ""},
		{"ls missing", "ls " + filepath.Join(dir, "no"), 1, nil, ""},
		{"ping", "ping -t localhost", 0, nil, "ping -t localhost"},
		{"ipconfig", "ipconfig /all", 0, nil, "ipconfig /all"},
		{"exit", "exit 3", 3, nil, ""},
		{"refused", "get-date", 0, nil, "get-date"},
		{"refused expression", "$x = 1", 1, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			var ran string
			sh := &shell{stdout: &out, stderr: &errOut, stdin: strings.NewReader(""),
				getenv:    func(n string) string { return map[string]string{"COMPUTERNAME": "TEST-HOSTNAME"}[strings.ToUpper(n)] },
				processes: func() ([]process, error) { return []process{{4, "pause.exe"}, {8, "powershell.exe"}}, nil },
				external:  func(args []string) (int, error) { ran = strings.Join(args, " "); return 0, nil },
			}
			if code := sh.run(tt.script); code != tt.code {
				t.Errorf("exit status %d, want %d; stderr %q", code, tt.code, errOut.String())
			}
			rest := out.String()
			for _, s := range tt.stdout {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Fatalf("stdout %q lacks %q", out.String(), s)
				}
				rest = rest[i+len(s):]
			}
			if (tt.name == "sleep no match" || tt.name == "ls empty") && out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
			if ran != tt.ran {
				t.Errorf("ran %q, want %q", ran, tt.ran)
			}
		})
	}
}

// The logging loop critest's log specs run writes a line a second until
// a console control event ends it, as start-sleep does.
func TestLoopEndsOnConsoleEvent(t *testing.T) {
	events := make(chan os.Signal, 1)
	var out bytes.Buffer
	sh := &shell{stdout: &out, stderr: &out, getenv: func(string) string { return "" }, events: events}
	done := make(chan int)
	go func() { done <- sh.run("while($true) { echo 'hello World'; sleep 0.05; }") }()
	time.Sleep(200 * time.Millisecond)
	events <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != statusControlC || !strings.HasPrefix(out.String(), "hello World\r\nhello World\r\n") {
			t.Errorf("exit status %#x, output %q", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end on the event")
	}
}

// A console control event ends the script while a program it started
// runs: critest's pause command, `powershell -c "ping -t localhost"`, is
// stopped that way.
func TestExternalEndsOnConsoleEvent(t *testing.T) {
	events := make(chan os.Signal, 1)
	running := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var out bytes.Buffer
	sh := &shell{stdout: &out, stderr: &out, getenv: func(string) string { return "" }, events: events,
		external: func([]string) (int, error) { close(running); <-release; return 0, nil }}
	done := make(chan int)
	go func() { done <- sh.run("ping -t localhost") }()
	<-running
	events <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != statusControlC {
			t.Errorf("exit status %#x, want STATUS_CONTROL_C_EXIT; output %q", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not end at the event while its program ran")
	}
}
