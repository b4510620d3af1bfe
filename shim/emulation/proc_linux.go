//go:build linux

package emulation

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/winproc/winproc/shim/compute"
	"golang.org/x/sys/unix"
)

// A silo's processes are those of its cgroup (cgroup_linux.go). Where the
// machine offers no cgroup v2 hierarchy to write to (a shim in a container
// without delegation), they are found by scanning /proc for processes whose
// environment holds WINEPREFIX=<the system's prefix>. Every Wine process
// carries it: the backend sets it on the wineserver and on every process it
// starts, and Wine copies it into the environment of every process a Windows
// program creates (it is part of the Windows environment block Wine builds).
// The price of the scan, documented in doc.go: a Windows program that starts
// a child with an environment block lacking WINEPREFIX hides that child from
// it (it still dies with the wineserver), and every scan reads every
// process on the machine.

// procStat is what the backend reads from /proc/<pid>/stat.
type procStat struct {
	pid   int
	comm  string
	state byte
	ppid  int
	// utime and stime are in clock ticks.
	utime, stime uint64
	// start is the start time in clock ticks after boot.
	start uint64
}

// readKernelFile reads a small file of /proc or a cgroup with plain system
// calls: os.ReadFile would also stat it and try to register it with the
// runtime's poller (fcntl, epoll_ctl), which triples the system calls of
// statistics containerd asks for every second.
func readKernelFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 1024)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := readKernelFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (procStat, error) {
	// The command name is in parentheses and may itself hold spaces and
	// parentheses; the fields after the last ')' are fixed.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15, starttime 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	s := procStat{pid: pid, comm: string(b[open+1 : end]), state: f[0][0]}
	var err error
	if s.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	if s.utime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: utime: %w", pid, err)
	}
	if s.stime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: stime: %w", pid, err)
	}
	if s.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return s, nil
}

// gone reports whether a process in this state no longer runs: a zombie
// (exited, not yet reaped) or dead.
func (s procStat) gone() bool { return s.state == 'Z' || s.state == 'X' || s.state == 'x' }

// allPIDs lists the numeric entries of /proc.
func allPIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// environPrefix returns the WINEPREFIX in /proc/<pid>/environ, or "" (also
// for a zombie, whose environment is gone, or a process that cannot be
// read).
func environPrefix(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	const key = "WINEPREFIX="
	for len(b) > 0 {
		var kv []byte
		if i := bytes.IndexByte(b, 0); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			kv, b = b, nil
		}
		if bytes.HasPrefix(kv, []byte(key)) {
			return string(kv[len(key):])
		}
	}
	return ""
}

// siloMembers returns the running processes of a silo, zombies excluded:
// those in its cgroup, or, without one (""), siloProcesses(prefix).
func siloMembers(cgroup, prefix string) ([]procStat, error) {
	if cgroup == "" {
		return siloProcesses(prefix)
	}
	pids, err := cgroupPIDs(cgroup)
	if err != nil {
		return nil, fmt.Errorf("the silo's cgroup: %w", err)
	}
	out := make([]procStat, 0, len(pids))
	for _, pid := range pids {
		if st, err := readStat(pid); err == nil && (!st.gone() || threadsLeft(pid)) {
			out = append(out, st)
		}
	}
	return out, nil
}

// threadsLeft reports whether the process pid, whose main thread is a
// zombie, still has other threads running (a Wine process can end its
// main thread first): it is alive, and keeps its cgroup busy.
func threadsLeft(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err == nil && len(tasks) > 1
}

// siloProcesses returns the running processes of the silo whose prefix is
// prefix: every process, zombies excluded, whose environment holds
// WINEPREFIX=prefix, the wineserver included.
func siloProcesses(prefix string) ([]procStat, error) {
	pids, err := allPIDs()
	if err != nil {
		return nil, fmt.Errorf("scan /proc: %w", err)
	}
	var out []procStat
	for _, pid := range pids {
		if environPrefix(pid) != prefix {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.gone() {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// cmdline returns the arguments in /proc/<pid>/cmdline. Wine overwrites a
// process's argument area with its Windows command line split into
// arguments (C:\windows\system32\services.exe, C:\app.exe arg...), padded
// with NULs.
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	var args []string
	for _, a := range bytes.Split(b, []byte{0}) {
		if len(a) > 0 {
			args = append(args, string(a))
		}
	}
	return args
}

// imageName is the executable's base name of a Wine process: the last
// element of the first argument of its command line (Windows or Unix
// separators), else its comm, which Wine sets to the exe name but the kernel
// cuts to 15 bytes.
func imageName(st procStat) string {
	if args := cmdline(st.pid); len(args) > 0 {
		a := args[0]
		if i := strings.LastIndexAny(a, `\/`); i >= 0 {
			a = a[i+1:]
		}
		if a != "" {
			return a
		}
	}
	return st.comm
}

// wineSystemImages are the programs Wine itself runs in every prefix, its
// stand-ins for a silo's system processes. Shutdown does not wait for them.
var wineSystemImages = map[string]bool{
	"services.exe":        true,
	"winedevice.exe":      true,
	"plugplay.exe":        true,
	"svchost.exe":         true,
	"rpcss.exe":           true,
	"explorer.exe":        true,
	"conhost.exe":         true,
	"wineboot.exe":        true,
	"winemenubuilder.exe": true,
}

// isWineSystemProcess reports whether pid runs one of Wine's own programs
// from C:\windows\system32.
func isWineSystemProcess(pid int) bool {
	args := cmdline(pid)
	if len(args) == 0 {
		return false
	}
	a := strings.ToLower(strings.ReplaceAll(args[0], "/", `\`))
	dir, base := `c:\windows\system32\`, ""
	if !strings.HasPrefix(a, dir) {
		return false
	}
	base = a[len(dir):]
	return wineSystemImages[base]
}

// memInfo is a process's memory, in bytes.
type memInfo struct {
	// commit approximates Windows' committed memory: the size of the
	// process's private writable mappings. Wine reserves address space
	// with PROT_NONE and commits it by making it writable, so this follows
	// VirtualAlloc's commit far better than VmSize, which counts every
	// reservation (gigabytes for any Wine process).
	commit uint64
	// privateWS and sharedWS are the resident private and shared pages.
	privateWS, sharedWS uint64
}

// readMem reads a process's memory from the counters in
// /proc/<pid>/statm, which cost no walk of its mappings (a Wine process has
// thousands) and little else: containerd's CRI asks every container for
// statistics every second. Its data field counts the private writable
// mappings, data and stack (VmData and VmStk: commit); resident minus
// shared is the resident private memory (RssAnon), shared the resident
// file and shared-memory pages.
func readMem(pid int) memInfo {
	var m memInfo
	b, err := readKernelFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return m
	}
	// size resident shared text lib data dt, in pages
	f := strings.Fields(string(b))
	if len(f) < 6 {
		return m
	}
	page := uint64(os.Getpagesize())
	resident, _ := strconv.ParseUint(f[1], 10, 64)
	shared, _ := strconv.ParseUint(f[2], 10, 64)
	data, _ := strconv.ParseUint(f[5], 10, 64)
	m.commit = data * page
	if resident > shared {
		m.privateWS = (resident - shared) * page
	}
	m.sharedWS = shared * page
	return m
}

// ioInfo is a process's I/O from /proc/<pid>/io.
type ioInfo struct {
	// readBytes and writeBytes are the bytes the process made the storage
	// layer fetch and dirty (read_bytes, write_bytes).
	readBytes, writeBytes uint64
}

// ioUnit is the size HCS normalises storage I/O counts to: an I/O of more
// than 64 KiB counts as several.
const ioUnit = 64 << 10

// ioCount approximates the normalised I/O count of n bytes: Linux counts
// no storage operations per process (syscr and syscw count every read and
// write call, of pipes and sockets too, and the wineserver makes a great
// many), so each 64 KiB started counts as one.
func ioCount(n uint64) uint64 { return (n + ioUnit - 1) / ioUnit }

func readIO(pid int) ioInfo {
	var io ioInfo
	b, err := readKernelFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return io
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "read_bytes":
			io.readBytes = n
		case "write_bytes":
			io.writeBytes = n
		}
	}
	return io
}

var (
	clockOnce  sync.Once
	clockTicks uint64 = 100
	bootTime   time.Time
)

// clock returns the kernel's clock ticks per second (USER_HZ, from the
// auxiliary vector's AT_CLKTCK; 100 when it cannot be read) and the boot
// time (btime in /proc/stat).
func clock() (uint64, time.Time) {
	clockOnce.Do(func() {
		if b, err := os.ReadFile("/proc/self/auxv"); err == nil {
			const atClkTck = 17
			for i := 0; i+16 <= len(b); i += 16 {
				k := binary.NativeEndian.Uint64(b[i:])
				v := binary.NativeEndian.Uint64(b[i+8:])
				if k == atClkTck && v > 0 {
					clockTicks = v
				}
			}
		}
		if b, err := os.ReadFile("/proc/stat"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "btime "); ok {
					if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
						bootTime = time.Unix(sec, 0)
					}
				}
			}
		}
	})
	return clockTicks, bootTime
}

// ticks converts clock ticks to a duration.
func ticks(n uint64) time.Duration {
	hz, _ := clock()
	return time.Duration(n) * (time.Second / time.Duration(hz))
}

// startTime is when a process started.
func startTime(st procStat) time.Time {
	_, boot := clock()
	return boot.Add(ticks(st.start))
}

// processInfo describes a silo process for ProcessList.
func processInfo(st procStat) compute.ProcessInfo {
	m := readMem(st.pid)
	return compute.ProcessInfo{
		Pid:                          uint32(st.pid),
		ImageName:                    imageName(st),
		CreateTimestamp:              startTime(st),
		UserTime:                     ticks(st.utime),
		KernelTime:                   ticks(st.stime),
		MemoryCommitBytes:            m.commit,
		MemoryWorkingSetPrivateBytes: m.privateWS,
		MemoryWorkingSetSharedBytes:  m.sharedWS,
	}
}

// childPIDs lists the children of this process: those it started and the
// orphans re-parented to it as a child subreaper. It reads the children
// files of its threads (every thread has its own children) and falls back
// to a scan of /proc when the kernel lacks them.
func childPIDs(self int) ([]int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", self))
	if err == nil && len(tasks) > 0 {
		seen := map[int]bool{}
		var out []int
		ok := false
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			ok = true
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
		}
		if ok {
			return out, nil
		}
	}
	pids, err := allPIDs()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		if st, err := readStat(pid); err == nil && st.ppid == self {
			out = append(out, pid)
		}
	}
	return out, nil
}
