package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage"
)

const inspectHelp = `
Describes the images of a docker-archive tar, an OCI layout tar or an OCI
layout directory: names, index entries with their platform and os.version,
configs and layers, and inconsistencies (missing blobs, an index os.version
that disagrees with the config, ...). With -host-build it also says which
image a host of that build would run (winbuild.BestManifest).
`

func runImageInspect(ctx context.Context, e *env, sc *subcommand, args []string) error {
	fs := sc.flagSet(e, inspectHelp)
	var hostBuild, arch string
	fs.StringVar(&hostBuild, "host-build", "", "show the image a host of this Windows build (e.g. 10.0.20348) would use")
	fs.StringVar(&arch, "arch", winimage.DefaultArchitecture, "architecture of that host")
	pos, err := sc.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return sc.usageErr(fs, "want exactly one FILE or LAYOUT, got %d arguments", len(pos))
	}
	var host *winbuild.Version
	if hostBuild != "" {
		h, err := winbuild.Parse(hostBuild)
		if err != nil {
			return sc.usageErr(fs, "-host-build: %v", err)
		}
		host = &h
	}
	ins, err := winimage.Inspect(pos[0])
	if err != nil {
		return sc.fail(err)
	}
	printInspection(e.stdout, pos[0], ins, host, arch)
	return nil
}

func describePlatform(p *v1.Platform) string {
	if p == nil {
		return "(no platform)"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if p.OSVersion == "" {
		if strings.EqualFold(p.OS, "windows") {
			s += " (no os.version)"
		}
		return s
	}
	s += " " + p.OSVersion
	if v, err := winbuild.Parse(p.OSVersion); err == nil && v.Major == 10 && v.Minor == 0 {
		if r := winbuild.Release(v.Build); r != "" {
			s += " (" + r + ")"
		}
	}
	return s
}

func printInspection(w io.Writer, path string, ins *winimage.Inspection, host *winbuild.Version, arch string) {
	fmt.Fprintf(w, "%s: %s, %d entries\n", path, ins.Format, len(ins.Entries))
	for _, e := range ins.Entries {
		name := "(unnamed)"
		if len(e.Names) > 0 {
			name = strings.Join(e.Names, ", ")
		}
		fmt.Fprintf(w, "\n%s\n", name)
		printEntry(w, e, "  ")
		if host != nil {
			if best, err := e.Best(*host, arch); err != nil {
				fmt.Fprintf(w, "  host %s: %v\n", host.Label(), err)
			} else {
				fmt.Fprintf(w, "  host %s runs %s (%s)\n", host.Label(), entryID(best), describePlatform(best.Platform()))
			}
		}
	}
}

// entryID is the manifest digest, or the config digest in a docker-archive.
func entryID(e *winimage.Entry) string {
	if e.Descriptor.MediaType == "" && e.Config != nil {
		return "config " + e.ConfigDigest.String()
	}
	return e.Descriptor.Digest.String()
}

func printEntry(w io.Writer, e *winimage.Entry, indent string) {
	d := e.Descriptor
	switch {
	case e.IsIndex():
		fmt.Fprintf(w, "%sindex %s (%s, %d bytes)\n", indent, d.Digest, d.MediaType, d.Size)
		for _, c := range e.Manifests {
			printEntry(w, c, indent+"  ")
		}
	case e.Config != nil:
		if d.MediaType != "" {
			fmt.Fprintf(w, "%smanifest %s %s (%s, %d bytes)\n", indent, d.Digest, describePlatform(d.Platform), d.MediaType, d.Size)
		} else {
			fmt.Fprintf(w, "%simage\n", indent)
		}
		cf := e.Config
		fmt.Fprintf(w, "%s  config %s %s", indent, e.ConfigDigest, describePlatform(cf.Platform()))
		if !cf.Created.IsZero() {
			fmt.Fprintf(w, ", created %s", cf.Created.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		c := cf.Config
		for _, f := range []struct {
			name string
			val  any
			set  bool
		}{
			{"entrypoint", c.Entrypoint, c.Entrypoint != nil},
			{"cmd", c.Cmd, c.Cmd != nil},
			{"env", c.Env, len(c.Env) > 0},
			{"workdir", c.WorkingDir, c.WorkingDir != ""},
			{"user", c.User, c.User != ""},
			{"labels", c.Labels, len(c.Labels) > 0},
		} {
			if f.set {
				b, _ := json.Marshal(f.val)
				fmt.Fprintf(w, "%s    %s %s\n", indent, f.name, b)
			}
		}
		for _, l := range e.Layers {
			ld := l.Descriptor
			fmt.Fprintf(w, "%s  layer %s %d bytes", indent, ld.Digest, ld.Size)
			if ld.MediaType != "" {
				fmt.Fprintf(w, " %s", ld.MediaType)
			}
			if l.File != "" {
				fmt.Fprintf(w, " file %s", l.File)
			}
			if l.DiffID != (v1.Hash{}) {
				fmt.Fprintf(w, " diff %s", l.DiffID)
			}
			if l.Missing {
				fmt.Fprint(w, " (not present)")
			}
			fmt.Fprintln(w)
		}
	default:
		fmt.Fprintf(w, "%s%s %s\n", indent, d.MediaType, d.Digest)
	}
	for _, p := range e.Problems {
		fmt.Fprintf(w, "%s  PROBLEM: %s\n", indent, p)
	}
}
