//go:build linux

package emulation

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Where the machine offers a writable cgroup v2 hierarchy, each silo's
// processes run in a cgroup of their own, as a Windows silo's run in its job
// object: the backend starts every process it starts for a silo into that
// cgroup (clone3 with CLONE_INTO_CGROUP, through SysProcAttr.CgroupFD), and
// whatever those start inherits it. The cgroup then names the silo's
// processes (cgroup.procs) without a scan of /proc, ends them all at once
// (cgroup.kill), accounts the CPU of those that ended too (cpu.stat), and
// still names the silo of a zombie (/proc/<pid>/cgroup), which lets the
// reaper act on SIGCHLD alone instead of polling. No controller is needed.
// Without such a hierarchy (a shim in a container without cgroup
// delegation) the backend finds a silo's processes by their WINEPREFIX
// instead (proc_linux.go).

// siloCgroupsDir is the directory, below the shim's own cgroup, that holds
// the silos' cgroups.
const siloCgroupsDir = "winproc-silos"

// cgroupTree is where silos' cgroups are made.
type cgroupTree struct {
	// mount is where the cgroup v2 hierarchy is mounted; base is the
	// directory of the silos' cgroups, below it.
	mount, base string
}

// siloCgroups returns the process's cgroupTree, or an error saying why the
// machine offers none; it looks once.
var siloCgroups = sync.OnceValues(findCgroupTree)

func findCgroupTree() (*cgroupTree, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup(os.Getpid())
	if err != nil {
		return nil, err
	}
	t := &cgroupTree{mount: mount, base: filepath.Join(mount, own, siloCgroupsDir)}
	if err := os.MkdirAll(t.base, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2 hierarchy at %s is not writable: %w", mount, err)
	}
	return t, nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted (on hybrid
// machines, beside the v1 controllers).
func cgroup2Mount() (string, error) {
	mount := ""
	err := scanMounts("/proc/self/mountinfo", func(root, mountpoint, fstype, _ string) bool {
		if fstype == "cgroup2" && root == "/" {
			mount = mountpoint
			return false
		}
		return true
	})
	if err != nil {
		return "", err
	}
	if mount == "" {
		return "", errors.New("no cgroup v2 hierarchy is mounted")
	}
	return mount, nil
}

// scanMounts calls fn with each mount of a mountinfo file, its root and
// mount point unescaped, until fn returns false.
func scanMounts(path string, fn func(root, mountpoint, fstype, superOptions string) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source super-options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 3 {
			continue
		}
		if !fn(unescapeMountPath(fields[3]), unescapeMountPath(fields[4]), postFields[0], postFields[2]) {
			return nil
		}
	}
	return sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup returns the cgroup v2 path of pid (its "0::" line), also for a
// zombie, whose line keeps the cgroup it died in.
func ownCgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("process %d is in no cgroup v2", pid)
}

// siloOf returns the absolute path of the cgroup a system in dir gets: one
// per system directory, whoever makes it.
func (t *cgroupTree) siloOf(dir string) string {
	return filepath.Join(t.base, siloCgroupName(dir))
}

// siloCgroupName is the name of the cgroups of a system in dir.
func siloCgroupName(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:8])
}

// holds reports whether pid (alive or a zombie) is in a silo's cgroup.
func (t *cgroupTree) holds(pid int) bool {
	p, err := ownCgroup(pid)
	if err != nil {
		return false
	}
	return strings.HasPrefix(filepath.Join(t.mount, p), t.base+"/")
}

// makeCgroup creates the cgroup at path (it may exist).
func makeCgroup(path string) error {
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create the silo's cgroup: %w", err)
	}
	return nil
}

// startIn starts cmd with start (the reaper's, which registers it) in the
// cgroup at path, or as it is when path is "".
func startIn(path string, cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if path == "" {
		return start(cmd)
	}
	dir, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open the silo's cgroup: %w", err)
	}
	defer dir.Close()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(dir.Fd())
	return start(cmd)
}

// cgroupPIDs lists the processes in the cgroup at path (zombies are not
// listed); a cgroup that is gone holds none. Processes in cgroups below it
// are not the silo's own: cgroup.kill and removeCgroup reach them.
func cgroupPIDs(path string) ([]int, error) {
	b, err := readKernelFile(filepath.Join(path, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// walkCgroup calls fn with the cgroup at path and every cgroup below it,
// the deepest first, so that fn may remove them. A cgroup that is gone is
// skipped.
func walkCgroup(path string, fn func(dir string) error) error {
	entries, err := os.ReadDir(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := walkCgroup(filepath.Join(path, e.Name()), fn); err != nil {
				return err
			}
		}
	}
	return fn(path)
}

// killCgroup SIGKILLs every process in the cgroup at path at once.
func killCgroup(path string) error {
	if err := os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("kill the silo's cgroup: %w", err)
	}
	return nil
}

// removeCgroup kills what is left in the cgroup at path and removes it,
// and the cgroups a process of the silo made below it, the deepest first,
// once their processes are gone; killGrace bounds the wait. A cgroup that
// is gone is no error.
func removeCgroup(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, killGrace)
	defer cancel()
	// A process can outlive the scans that end a silo: one whose main
	// thread has exited looks like a zombie while its other threads run.
	// cgroup.kill reaches the cgroups below too.
	if err := killCgroup(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for {
		err := walkCgroup(path, func(dir string) error {
			if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
			return nil
		})
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EBUSY):
			return fmt.Errorf("remove the silo's cgroup: %w", err)
		}
		select {
		case <-ctx.Done():
			var left []string
			walkCgroup(path, func(dir string) error {
				pids, _ := cgroupPIDs(dir)
				for _, pid := range pids {
					st, _ := readStat(pid)
					left = append(left, fmt.Sprintf("%d %s (%c)", pid, strings.Join(cmdline(pid), " "), st.state))
				}
				return nil
			})
			return fmt.Errorf("remove the silo's cgroup %s: still in use by %v: %w", path, left, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// siloCgroupCPU returns the user and system CPU time of every process that ran
// in the cgroup at path, ended ones included (cpu.stat).
func siloCgroupCPU(path string) (user, system time.Duration, err error) {
	b, err := readKernelFile(filepath.Join(path, "cpu.stat"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "user_usec":
			user = time.Duration(n) * time.Microsecond
		case "system_usec":
			system = time.Duration(n) * time.Microsecond
		}
	}
	return user, system, nil
}

// SiloCgroup returns the cgroup directory the system in dir (Root/<id>)
// gets, or "" where the machine offers no cgroup v2 hierarchy: for tools
// that check a system left nothing behind.
func SiloCgroup(dir string) string {
	t, err := siloCgroups()
	if err != nil {
		return ""
	}
	return t.siloOf(dir)
}
