//go:build windows

package record

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// timeOfDay is SYSTEM_TIMEOFDAY_INFORMATION (ntddk.h), which
// NtQuerySystemInformation's SystemTimeOfDayInformation answers.
type timeOfDay struct {
	BootTime, CurrentTime, TimeZoneBias int64
	TimeZoneID, Reserved                uint32
	BootTimeBias, SleepTimeBias         uint64
}

// bootTime is when the node booted, in GetProcessTimes's units (100 ns
// since 1601), comparable with a Shim's Start.
func bootTime() (uint64, bool) {
	var t timeOfDay
	var n uint32
	if err := windows.NtQuerySystemInformation(windows.SystemTimeOfDayInformation, unsafe.Pointer(&t), uint32(unsafe.Sizeof(t)), &n); err != nil || t.BootTime <= 0 {
		return 0, false
	}
	return uint64(t.BootTime), true
}
