//go:build !windows

package record

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processStart is the start of process pid in clock ticks after boot
// (field 22 of /proc/<pid>/stat); false when it is gone or a zombie.
func processStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's closing parenthesis are fixed: f[0]
	// is field 3, the state.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil
}
