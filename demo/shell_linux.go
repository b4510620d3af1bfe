//go:build linux

package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func (d *demo) tool(name string) string { return filepath.Join(d.cfg.Tools, name) }

// sh runs argv in the demo directory with the shown environment and shows
// it and its output (display, or argv rendered). A failure returns the
// output as well.
func (d *demo) sh(ctx context.Context, display string, argv ...string) (string, error) {
	if display == "" {
		display = d.t.shellLine(argv)
	}
	d.t.command(display)
	out, err := d.quiet(ctx, argv...)
	shown := dropNoise(out)
	if shown != out && !d.noiseNoted {
		d.noiseNoted = true
		d.t.note("(ctr warns on every command that this host uses cgroup v1, a property of the machine,",
			"not of winproc: the transcript leaves that line out)")
	}
	d.t.output(shown)
	if err != nil {
		return out, fmt.Errorf("%s: %w", display, err)
	}
	return out, nil
}

// dropNoise removes ctr's cgroup v1 deprecation warning from out, and the
// clear-screen sequence crictl's stats tables start with.
func dropNoise(out string) string {
	out = strings.ReplaceAll(out, "\x1b[2J\x1b[H", "")
	lines := strings.SplitAfter(out, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.Contains(l, "DEPRECATION: The support for cgroup v1 is deprecated") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// quiet runs argv like sh without showing it.
func (d *demo) quiet(ctx context.Context, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = d.dir
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// short is a pod ID as crictl shows it.
func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
