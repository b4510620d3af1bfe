//go:build windows

package record

import "golang.org/x/sys/windows"

// stillActive is STILL_ACTIVE, the exit code of a process that runs.
const stillActive = 259

// processStart is the creation time of process pid (GetProcessTimes), in
// 100 ns units; false when it cannot be opened or has exited.
func processStart(pid int) (uint64, bool) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return 0, false
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil || code != stillActive {
		return 0, false
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, false
	}
	return uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime), true
}
