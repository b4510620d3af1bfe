package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// processes lists the system's processes (Toolhelp), as Get-Process
// does.
func processes() ([]process, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("snapshot of the processes: %w", err)
	}
	defer windows.CloseHandle(snap)
	var ps []process
	e := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		ps = append(ps, process{ID: e.ProcessID, Name: windows.UTF16ToString(e.ExeFile[:])})
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return nil, fmt.Errorf("list the processes: %w", err)
	}
	return ps, nil
}

// external runs a program named as a command, found as CreateProcess
// finds a name without a path (the directory of this program first,
// then the working directory, the system directories and PATH), with
// this process's standard streams, and waits for it. A console control
// event reaches it as it reaches this process (one console).
func external(args []string) (int, error) {
	var line string
	for i, a := range args {
		if i > 0 {
			line += " "
		}
		line += syscall.EscapeArg(a)
	}
	cmd, err := windows.UTF16PtrFromString(line)
	if err != nil {
		return 0, err
	}
	si := windows.StartupInfo{Cb: uint32(unsafe.Sizeof(windows.StartupInfo{})), Flags: windows.STARTF_USESTDHANDLES,
		StdInput: windows.Handle(os.Stdin.Fd()), StdOutput: windows.Handle(os.Stdout.Fd()), StdErr: windows.Handle(os.Stderr.Fd())}
	var pi windows.ProcessInformation
	if err := windows.CreateProcess(nil, cmd, nil, nil, true, 0, nil, nil, &si, &pi); err != nil {
		return 0, fmt.Errorf("the term is not a command this image holds: %w", err)
	}
	defer windows.CloseHandle(pi.Process)
	defer windows.CloseHandle(pi.Thread)
	if _, err := windows.WaitForSingleObject(pi.Process, windows.INFINITE); err != nil {
		return 0, fmt.Errorf("wait: %w", err)
	}
	var code uint32
	if err := windows.GetExitCodeProcess(pi.Process, &code); err != nil {
		return 0, fmt.Errorf("exit status: %w", err)
	}
	return int(code), nil
}
