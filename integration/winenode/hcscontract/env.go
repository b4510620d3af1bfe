package hcscontract

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf16"
)

// StandinEnv names the environment variable that holds the Windows path of
// the stand-in computecore.dll the Windows tests load.
const StandinEnv = "WINPROC_STANDIN_COMPUTECORE"

// StateDir is where the node's stand-ins keep their state (standin.h's
// STANDIN_STATE); FaultsFile is the faults file in it (faults.h).
const (
	StateDir   = `C:\ProgramData\winproc-standins`
	FaultsFile = StateDir + `\faults`
)

// TestAppEnv names the environment variable that holds the Windows path
// of the node's test program (cmd/winproc-testapp), for Windows tests that
// run it in a stand-in container.
const TestAppEnv = "WINPROC_TESTAPP"

// HelperEnv makes this package's Windows test binary a second HCS client:
// "id|volume|keep or terminate|owner" creates and starts that system
// (ShouldTerminateOnLastHandleClosed with "terminate") and exits without
// closing its handle.
const HelperEnv = "WINPROC_HCS_CONTRACT_HELPER"

// Document is a process-isolated container's document of owner on the
// volume vol.
func Document(owner, vol string, terminateOnClose bool) string {
	return fmt.Sprintf(`{"Owner":%q,"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Layers":[],"Path":%q}},"ShouldTerminateOnLastHandleClosed":%t}`,
		owner, vol, terminateOnClose)
}

// VolumeStateName is the name of the file in which the node's stand-ins
// keep the directory of the volume vol: standin.h's standin_guid of the
// name, as a GUID in braces.
func VolumeStateName(vol string) string {
	h1, h2 := uint64(14695981039346656037), uint64(1099511628211*31)
	for _, c := range utf16.Encode([]rune(strings.ToLower(vol))) {
		h1 = (h1 ^ uint64(c)) * 1099511628211
		h2 = (h2^uint64(c))*1469598103934665603 + 7
	}
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], h2)
	return fmt.Sprintf("{%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X}", uint32(h1), uint16(h1>>32), uint16(h1>>48),
		g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7])
}

// VolumeState is the content of a volume's state file: the directory, in
// UTF-16 without a terminator, as standin_write writes it.
func VolumeState(dir string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(dir)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}

// WriteVolume records dir as the directory of the volume vol, as the layer
// stand-in (vmcompute.c) does for a volume it made, so that a compute
// system whose Storage.Path names vol runs in dir. For Windows tests.
func WriteVolume(vol, dir string) error {
	state := filepath.Join(StateDir, "volumes")
	if err := os.MkdirAll(state, 0o755); err != nil {
		return fmt.Errorf("make the stand-ins' volume state %s: %w", state, err)
	}
	return os.WriteFile(filepath.Join(state, VolumeStateName(vol)), VolumeState(dir), 0o644)
}
