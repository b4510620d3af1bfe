// Package resolve finds the image a Windows host runs from an image in
// containerd: the target of the image record, the manifest of that target
// for the host, the manifest's config, and the Windows build the image was
// made for. The shim's image check (shim/imagecheck), the pod's pause
// rootfs (shim/pauseimage) and `winproc doctor`'s pause image check all
// resolve images here, so they judge an image alike; each says in its own
// words what is wrong.
//
// # The rule
//
// An index's manifest is chosen by the platform of its entries with
// winbuild.BestManifest, as containerd chooses one by the entry's platform:
// containerd v2's core/images.Manifest matches index entries on their
// platform, os.version included (github.com/containerd/platforms compares
// an entry's os.version with the host's on Windows), and reads a config's
// platform only for an entry that has none.
//
// The build the image was made for is winbuild.ImageOSVersion's, the rule
// the differ's build check and winimage share: its config's os.version, the
// image's own record of its base layers; when the config has none, the
// os.version of the index entry the manifest was chosen by, the build the
// image was published for. A target that is a manifest has only its
// config's. winbuild.Check judges the result: an image that says its build
// nowhere is ErrUnknownBuild there.
package resolve
