//go:build windows

package jobcontainer

import (
	"errors"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The binding's processes: creation in a job, waits, console events and
// pseudo consoles, the system's process records. The rules of
// binding_windows.go hold here too.

// Process creation flags: suspended until the process is in the job;
// away from the shim's own job, if it is in one (as runhcs).
const createFlags = windows.CREATE_SUSPENDED | windows.CREATE_UNICODE_ENVIRONMENT |
	windows.EXTENDED_STARTUPINFO_PRESENT | windows.CREATE_BREAKAWAY_FROM_JOB

// envBlock is env as CreateProcess's Unicode environment block.
func envBlock(env []string) (*uint16, error) {
	var block []uint16
	for _, kv := range env {
		s, err := windows.UTF16FromString(kv)
		if err != nil {
			return nil, err
		}
		block = append(block, s...)
	}
	block = append(block, 0)
	if len(env) == 0 {
		block = append(block, 0)
	}
	return &block[0], nil
}

func (winBinding) createProcess(p startParams) (started, error) {
	app, err := windows.UTF16PtrFromString(p.application)
	if err != nil {
		return started{}, err
	}
	line, err := windows.UTF16PtrFromString(p.commandLine)
	if err != nil {
		return started{}, err
	}
	dir, err := utf16(p.dir)
	if err != nil {
		return started{}, err
	}
	env, err := envBlock(p.env)
	if err != nil {
		return started{}, err
	}
	attrs, err := windows.NewProcThreadAttributeList(1)
	if err != nil {
		return started{}, err
	}
	defer attrs.Delete()
	si := &windows.StartupInfoEx{}
	si.Cb = uint32(unsafe.Sizeof(*si))
	inherit := false
	// The standard handles are always given: without
	// STARTF_USESTDHANDLES a process inherits the shim's own (NUL, the
	// panic log), and a pseudo console replaces only console handles
	// (microsoft/terminal#11276), so a Terminal process would write past
	// its console. Null ones make it open its console's (hcsshim
	// internal/exec sets the flag for the same reason).
	si.Flags = windows.STARTF_USESTDHANDLES
	if p.console != 0 {
		// The console is the process's stdio; the pseudo console's handle
		// is the attribute's value itself.
		if err := find(procUPTA); err != nil {
			return started{}, err
		}
		r, _, e := syscall.SyscallN(procUPTA.Addr(), uintptr(unsafe.Pointer(attrs.List())), 0, windows.PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, uintptr(p.console), unsafe.Sizeof(p.console), 0, 0)
		if r == 0 {
			return started{}, lastError(e)
		}
	} else {
		// Only the pipes are inherited (the handle list), not every
		// inheritable handle of the shim.
		var handles []windows.Handle
		for _, s := range []struct {
			f  *os.File
			to *windows.Handle
		}{{p.stdin, &si.StdInput}, {p.stdout, &si.StdOutput}, {p.stderr, &si.StdErr}} {
			if s.f != nil {
				*s.to = windows.Handle(s.f.Fd())
				handles = append(handles, *s.to)
			}
		}
		if len(handles) > 0 {
			inherit = true
			if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&handles[0]), uintptr(len(handles))*unsafe.Sizeof(handles[0])); err != nil {
				return started{}, err
			}
		}
	}
	si.ProcThreadAttributeList = attrs.List()
	var pi windows.ProcessInformation
	if err := windows.CreateProcessAsUser(windows.Token(p.token), app, line, nil, nil, inherit, createFlags, env, dir, &si.StartupInfo, &pi); err != nil {
		return started{}, err
	}
	return started{process: handle(pi.Process), thread: handle(pi.Thread), pid: pi.ProcessId}, nil
}

// procInJob is IsProcessInJob, which x/sys/windows does not have.
var procInJob = kernel32.NewProc("IsProcessInJob")

func (winBinding) ownJob() (bool, uint32, error) {
	if err := find(procInJob); err != nil {
		return false, 0, err
	}
	var in int32
	r, _, e := syscall.SyscallN(procInJob.Addr(), uintptr(windows.CurrentProcess()), 0, uintptr(unsafe.Pointer(&in)))
	if r == 0 {
		return false, 0, lastError(e)
	}
	if in == 0 {
		return false, 0, nil
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := find(procQryJ); err != nil {
		return true, 0, err
	}
	r, _, e = syscall.SyscallN(procQryJ.Addr(), 0, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info), 0)
	if r == 0 {
		return true, 0, lastError(e)
	}
	return true, info.BasicLimitInformation.LimitFlags, nil
}

func (winBinding) resumeThread(thread handle) error {
	_, err := windows.ResumeThread(windows.Handle(thread))
	return err
}

func (winBinding) waitProcess(process, cancel handle) (bool, error) {
	handles := []windows.Handle{windows.Handle(process), windows.Handle(cancel)}
	if err := find(procWFMO); err != nil {
		return false, err
	}
	r, _, e := syscall.SyscallN(procWFMO.Addr(), uintptr(len(handles)), uintptr(unsafe.Pointer(&handles[0])), 0, windows.INFINITE)
	switch uint32(r) {
	case windows.WAIT_OBJECT_0:
		return true, nil
	case windows.WAIT_OBJECT_0 + 1:
		return false, nil
	}
	return false, lastError(e)
}

func (winBinding) exitCode(process handle) (uint32, error) {
	var code uint32
	err := windows.GetExitCodeProcess(windows.Handle(process), &code)
	return code, err
}

func (winBinding) terminateProcess(process handle, code uint32) error {
	return windows.TerminateProcess(windows.Handle(process), code)
}

// ctrlAccess are the rights CreateRemoteThread needs.
const ctrlAccess = windows.PROCESS_CREATE_THREAD | windows.PROCESS_QUERY_INFORMATION |
	windows.PROCESS_VM_OPERATION | windows.PROCESS_VM_WRITE | windows.PROCESS_VM_READ

func (winBinding) openProcess(pid uint32) (handle, error) {
	h, err := windows.OpenProcess(ctrlAccess, false, pid)
	return handle(h), err
}

// ctrlEvent starts kernel32!CtrlRoutine in the process: kernel32 is at
// the same address in every process of a boot, so the shim's own address
// of it is the target's (runhcs's signalProcess relies on the same).
func (winBinding) ctrlEvent(process handle, event uint32) error {
	if err := find(procCtrl); err != nil {
		return err
	}
	if err := find(procCRT); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procCRT.Addr(), uintptr(process), 0, 0, procCtrl.Addr(), uintptr(event), 0, 0)
	if r == 0 {
		return lastError(e)
	}
	return windows.CloseHandle(windows.Handle(r))
}

func (winBinding) createEvent() (handle, error) {
	h, err := windows.CreateEvent(nil, 1, 0, nil)
	return handle(h), err
}

func (winBinding) setEvent(event handle) error {
	return windows.SetEvent(windows.Handle(event))
}

func (winBinding) createPseudoConsole(width, height uint16, in, out *os.File) (handle, error) {
	var h windows.Handle
	size := windows.Coord{X: int16(width), Y: int16(height)}
	err := windows.CreatePseudoConsole(size, windows.Handle(in.Fd()), windows.Handle(out.Fd()), 0, &h)
	return handle(h), err
}

func (winBinding) resizePseudoConsole(console handle, width, height uint16) error {
	return windows.ResizePseudoConsole(windows.Handle(console), windows.Coord{X: int16(width), Y: int16(height)})
}

func (winBinding) closePseudoConsole(console handle) {
	windows.ClosePseudoConsole(windows.Handle(console))
}

func (winBinding) systemProcesses() ([]processRecord, error) {
	// SYSTEM_PROCESS_INFORMATION entries, grown while they do not fit;
	// uint64s keep the entries aligned.
	size := uint32(512 << 10)
	for {
		buf := make([]uint64, size/8+1)
		err := windows.NtQuerySystemInformation(windows.SystemProcessInformation, unsafe.Pointer(&buf[0]), uint32(len(buf)*8), &size)
		if errors.Is(err, windows.STATUS_INFO_LENGTH_MISMATCH) {
			size += 64 << 10
			continue
		}
		if err != nil {
			return nil, err
		}
		return parseProcesses(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8))
	}
}

// parseProcesses reads the entries of a SystemProcessInformation buffer.
func parseProcesses(b []byte) ([]processRecord, error) {
	var out []processRecord
	for off := 0; ; {
		if off+int(unsafe.Sizeof(windows.SYSTEM_PROCESS_INFORMATION{})) > len(b) {
			return nil, errors.New("a process entry runs past the buffer")
		}
		e := (*windows.SYSTEM_PROCESS_INFORMATION)(unsafe.Pointer(&b[off]))
		out = append(out, processRecord{
			PID:          uint32(e.UniqueProcessID),
			ImageName:    e.ImageName.String(),
			CreateTime:   e.CreateTime,
			UserTime:     e.UserTime,
			KernelTime:   e.KernelTime,
			PrivateBytes: uint64(e.PrivatePageCount),
			WorkingSet:   uint64(e.WorkingSetSize),
			PrivateSet:   uint64(e.WorkingSetPrivateSize),
		})
		if e.NextEntryOffset == 0 {
			return out, nil
		}
		off += int(e.NextEntryOffset)
	}
}
