//go:build linux

package cgfreezer

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroup is one freezer cgroup that tests move processes into.
type Cgroup struct {
	root, dir string
}

// Mount returns where the cgroup v1 freezer hierarchy is mounted, or an
// error saying why there is none (a machine with cgroup v2 alone).
func Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source super-options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 3 || postFields[0] != "cgroup" || fields[3] != "/" {
			continue
		}
		for _, o := range strings.Split(postFields[2], ",") {
			if o == "freezer" {
				return fields[4], nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup v1 freezer hierarchy is mounted (cgroup v2's freeze lets SIGKILL through)")
}

// New makes the freezer cgroup name at the hierarchy's root.
func New(name string) (*Cgroup, error) {
	root, err := Mount()
	if err != nil {
		return nil, err
	}
	c := &Cgroup{root: root, dir: filepath.Join(root, name)}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("freezer cgroup: %w", err)
	}
	return c, nil
}

// Add moves the processes pids into the cgroup (a process there when it is
// frozen stays frozen until Thaw).
func (c *Cgroup) Add(pids ...int) error {
	for _, pid := range pids {
		err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such process") {
			return fmt.Errorf("move process %d into the freezer cgroup: %w", pid, err)
		}
	}
	return nil
}

// Freeze freezes the cgroup's processes and waits until they all are.
func (c *Cgroup) Freeze() error { return c.set("FROZEN") }

// Thaw thaws them: signals held back meanwhile are delivered.
func (c *Cgroup) Thaw() error { return c.set("THAWED") }

func (c *Cgroup) set(state string) error {
	path := filepath.Join(c.dir, "freezer.state")
	if err := os.WriteFile(path, []byte(state), 0); err != nil {
		return fmt.Errorf("set the freezer to %s: %w", state, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == state {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the freezer is %s, not %s, after 10 s", strings.TrimSpace(string(b)), state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Remove thaws the cgroup, moves what is left in it back to the root and
// removes it; a process that was killed while frozen keeps the cgroup busy
// for a moment as it exits, so the removal is retried for up to 10 s.
func (c *Cgroup) Remove() error {
	if err := c.Thaw(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(c.root, "cgroup.procs"), []byte(f), 0)
		}
		err = os.Remove(c.dir)
		switch {
		case err == nil, errors.Is(err, os.ErrNotExist):
			return nil
		case !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline):
			return fmt.Errorf("remove the freezer cgroup: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
