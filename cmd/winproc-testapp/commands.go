package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"
)

func (p *program) echo(args []string) int {
	fs := p.flagSet("echo", "")
	if code := p.parse(fs, args); code >= 0 {
		return code
	}
	if _, err := io.Copy(p.stdout, p.stdin); err != nil {
		fmt.Fprintf(p.stderr, "%s: echo: %v\n", name, err)
		return 1
	}
	return 0
}

func (p *program) exit(args []string) int {
	fs := p.flagSet("exit", "N")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 1 {
		return p.usageError(fs, "want one exit status, got %d arguments", fs.NArg())
	}
	code, err := parseStatus(fs.Arg(0))
	if err != nil {
		return p.usageError(fs, "%v", err)
	}
	return code
}

// parseStatus parses an exit status: a decimal number from 0 to 255.
func parseStatus(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("invalid exit status %q: want 0..255", s)
	}
	return int(n), nil
}

func (p *program) env(args []string) int {
	fs := p.flagSet("env", "")
	if code := p.parse(fs, args); code >= 0 {
		return code
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: env: %v\n", name, err)
		return 1
	}
	fmt.Fprint(p.stdout, sortedEnv(os.Environ()))
	fmt.Fprintf(p.stdout, "cwd=%s\nuser=%s\n", cwd, os.Getenv("USERNAME"))
	return 0
}

// sortedEnv returns env sorted, one variable a line.
func sortedEnv(env []string) string {
	env = slices.Sorted(slices.Values(env))
	var b []byte
	for _, kv := range env {
		b = append(b, kv...)
		b = append(b, '\n')
	}
	return string(b)
}

func (p *program) console(args []string) int {
	fs := p.flagSet("console", "[-exit-code N]")
	code := fs.Int("exit-code", 0, "exit status after the event (0..255)")
	if c := p.parse(fs, args); c >= 0 {
		return c
	}
	if *code < 0 || *code > 255 {
		return p.usageError(fs, "invalid -exit-code %d: want 0..255", *code)
	}
	events, stop := p.notify()
	defer stop()
	fmt.Fprintln(p.stdout, "ready")
	fmt.Fprintf(p.stdout, "got %s\n", eventName(<-events))
	return *code
}

func (p *program) burn(args []string) int {
	fs := p.flagSet("burn", "-seconds N")
	seconds := fs.Float64("seconds", 0, "how long to burn CPU")
	if c := p.parse(fs, args); c >= 0 {
		return c
	}
	d, err := secondsDuration(*seconds)
	if err != nil {
		return p.usageError(fs, "%v", err)
	}
	events, stop := p.notify()
	defer stop()
	fmt.Fprintln(p.stdout, "ready")
	before, _ := cpuTime()
	var got os.Signal
	spin(d, func() bool {
		select {
		case got = <-events:
			return true
		default:
			return false
		}
	})
	used, _ := cpuTime()
	if got != nil {
		fmt.Fprintf(p.stdout, "got %s\n", eventName(got))
	}
	fmt.Fprintf(p.stdout, "burned cpu=%v\n", (used - before).Round(time.Millisecond))
	return 0
}

func (p *program) alloc(args []string) int {
	fs := p.flagSet("alloc", "-mb N")
	mb := fs.Int("mb", 0, "MiB to allocate and hold")
	if c := p.parse(fs, args); c >= 0 {
		return c
	}
	if *mb < 0 || *mb > maxAllocMiB {
		return p.usageError(fs, "invalid -mb %d: want 0..%d", *mb, maxAllocMiB)
	}
	events, stop := p.notify()
	defer stop()
	mem := allocMiB(*mb)
	fmt.Fprintf(p.stdout, "holding %d MiB\n", *mb)
	fmt.Fprintln(p.stdout, "ready")
	fmt.Fprintf(p.stdout, "got %s\n", eventName(<-events))
	runtime.KeepAlive(mem)
	return 0
}

func (p *program) sleep(args []string) int {
	fs := p.flagSet("sleep", "-seconds N [-ignore-events]")
	seconds := fs.Float64("seconds", 0, "how long to sleep; 0 sleeps until a console event")
	ignore := fs.Bool("ignore-events", false, "report console events and sleep on, as an app that only a kill stops")
	if c := p.parse(fs, args); c >= 0 {
		return c
	}
	d, err := secondsDuration(*seconds)
	if err != nil {
		return p.usageError(fs, "%v", err)
	}
	events, stop := p.notify()
	defer stop()
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	fmt.Fprintln(p.stdout, "ready")
	for {
		select {
		case sig := <-events:
			fmt.Fprintf(p.stdout, "got %s\n", eventName(sig))
			if !*ignore {
				return 0
			}
		case <-timeout:
			return 0
		}
	}
}

// maxSeconds bounds -seconds; far beyond any test, and within a Duration.
const maxSeconds = 1e6

func secondsDuration(s float64) (time.Duration, error) {
	if !(s >= 0 && s <= maxSeconds) { // also rejects NaN
		return 0, fmt.Errorf("invalid -seconds %v: want 0..%v", s, maxSeconds)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// getTimeout bounds a get.
const getTimeout = 30 * time.Second

func (p *program) get(args []string) int {
	fs := p.flagSet("get", "URL")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 1 {
		return p.usageError(fs, "want one URL, got %d arguments", fs.NArg())
	}
	client := &http.Client{Timeout: getTimeout}
	resp, err := client.Get(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: get: %v\n", name, err)
		return 1
	}
	defer resp.Body.Close()
	if _, err := io.Copy(p.stdout, resp.Body); err != nil {
		fmt.Fprintf(p.stderr, "%s: get: %v\n", name, err)
		return 1
	}
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(p.stderr, "%s: get: %s\n", name, resp.Status)
		return 1
	}
	return 0
}
