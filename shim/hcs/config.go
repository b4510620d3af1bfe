package hcs

import (
	"strings"

	"github.com/Microsoft/hcsshim/osversion"

	"github.com/winproc/winproc/internal/validation"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// Owner is the HCS owner of every system the backend creates: the
// management stack HCS records for it (docker uses "docker", runhcs the
// shim's binary name).
const Owner = "winproc"

// checkSettings refuses what this host's Windows build cannot do, before
// anything is touched. hostBuild is osversion.Build(). The layer stack was
// checked by the translation (specconv); the container document refuses a
// storage without layers (containerDocument).
func checkSettings(s *compute.Settings, hostBuild uint16) error {
	if s == nil {
		return invalid("the compute system settings are missing")
	}
	if hostBuild < osversion.RS5 {
		return notSupported("winproc needs Windows build %d (1809, Windows Server 2019) or later, where HCS takes schema-v2 documents; this host is build %d", osversion.RS5, hostBuild)
	}
	if a := s.Resources.CPUAffinity; len(a) > 0 && hostBuild < osversion.LTSC2022 && (len(a) > 1 || a[0].Group != 0) {
		// hcsshim internal/hcsoci ValidateCPUAffinityEntries.
		return notSupported("processor affinity in more than one processor group, or in a group other than 0, needs Windows build %d (Windows Server 2022) or later; this host is build %d", osversion.LTSC2022, hostBuild)
	}
	return nil
}

// layerName is the directory name of a layer path, the name its layer id
// is derived from (hcsshim.NameToGuid of the base name, as hcsshim's
// wclayer.LayerID). The path is a Windows path whatever the platform:
// both separators count, trailing ones are ignored.
func layerName(path string) string {
	path = strings.TrimRight(path, `\/`)
	if i := strings.LastIndexAny(path, `\/`); i >= 0 {
		path = path[i+1:]
	}
	return path
}

// processParameters maps a process onto HcsCreateProcess's document.
// Pipes are created for the streams the caller connected; a Terminal
// process has no stderr pipe (its console merges the output into stdout).
func processParameters(p *compute.ProcessSettings) (*schema2.ProcessParameters, error) {
	if p == nil {
		return nil, invalid("the process settings are missing")
	}
	if p.CommandLine == "" {
		return nil, invalid("the process has an empty command line")
	}
	if err := validation.Process(p.CommandLine, p.Env); err != nil {
		return nil, err
	}
	c := &schema2.ProcessParameters{
		CommandLine:      p.CommandLine,
		User:             p.User,
		WorkingDirectory: p.WorkingDirectory,
		Environment:      environment(p.Env),
		EmulateConsole:   p.Terminal,
		CreateStdInPipe:  p.Stdin != nil,
		CreateStdOutPipe: p.Stdout != nil,
		CreateStdErrPipe: p.Stderr != nil && !p.Terminal,
	}
	if p.Terminal && (p.ConsoleWidth > 0 || p.ConsoleHeight > 0) {
		c.ConsoleSize = []int32{int32(p.ConsoleHeight), int32(p.ConsoleWidth)}
	}
	return c, nil
}

// environment turns the NAME=VALUE list into HCS's map. Windows names
// are case-insensitive, so a later entry replaces an earlier one whatever
// its case, and the map keeps the later spelling. An empty value unsets the
// name: Windows has no empty variables, and runhcs drops them too. What the
// map loses is the order of the list and the duplicates, which do not
// matter once the later entry has won. Entries without '=' are skipped
// (specconv.FromSpec refuses them).
func environment(env []string) map[string]string {
	m := make(map[string]string)
	key := make(map[string]string) // upper-case name -> spelling in m
	for _, e := range env {
		name, value, ok := strings.Cut(e, "=")
		if !ok || name == "" {
			continue
		}
		upper := strings.ToUpper(name)
		if old, ok := key[upper]; ok {
			delete(m, old)
			delete(key, upper)
		}
		if value == "" {
			continue
		}
		m[name] = value
		key[upper] = name
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
