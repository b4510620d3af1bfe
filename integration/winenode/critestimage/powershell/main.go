package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	script, err := scriptOf(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "powershell: %v\r\n", err)
		return 1
	}
	// The Go runtime turns console control events into these signals.
	events := make(chan os.Signal, 1)
	signal.Notify(events, os.Interrupt, syscall.SIGTERM)
	sh := &shell{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: getenv,
		processes: processes, external: external, events: events}
	return sh.run(script)
}

// scriptOf is the script of `-c|/c|-Command SCRIPT...`: PowerShell joins
// the arguments after -Command with blanks.
func scriptOf(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("want -c SCRIPT, got %q: this image's powershell runs only the scripts critest sends", args)
	}
	switch strings.ToLower(args[0]) {
	case "-c", "/c", "-command", "/command":
		return strings.Join(args[1:], " "), nil
	}
	return "", fmt.Errorf("want -c SCRIPT, got %q: this image's powershell runs only the scripts critest sends", args)
}

// getenv looks a variable up case-insensitively, as Windows does.
func getenv(name string) string {
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
