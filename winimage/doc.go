// Package winimage builds Windows container images for process isolation:
// OCI images for os "windows" whose layers are Windows-format layer tars
// (Files/..., Hives/..., Windows metadata in PAX records; see package
// snapshotter/layertar), written as an OCI image layout directory, an OCI
// layout tar or a docker-archive tar (what `docker save` writes). All three
// are accepted by `ctr images import` (the layout directory once tarred,
// which is exactly the oci-archive format).
//
// Images and indexes are go-containerregistry values (v1.Image,
// v1.ImageIndex), so they can be combined with that library's mutate,
// layout and remote packages.
//
// # Building
//
// LayerFromTree turns a directory tree into a gzip-compressed layer whose
// Files/ is the tree (C:\ in the container). SyntheticBaseLayer is a tiny
// base layer (a few directories, a marker file and an empty Hives/): the
// Linux emulation backs C: with Wine's drive_c, so a base layer only has to
// be a valid Windows-format layer. Build makes an image from a Config and
// layers; Append adds layers and configuration to an existing image (for
// example a nanoserver base read with LoadBase), keeping its os.version;
// NewIndex combines images for several Windows builds into one index, whose
// descriptors carry platform.os.version (what containerd and
// winbuild.BestManifest match on). PauseImage builds the pod infrastructure
// image with the layout of Kubernetes' Windows pause image. Package
// winimage/resolve reads an image back out of containerd as a host runs it.
//
// # Reproducibility
//
// Every time written (file times in the layers, the config's created time,
// history) is the Created time of the build, DefaultCreated (the Unix
// epoch) unless set, and layer entries are written in a fixed order, so the
// same inputs give the same digests (with the same Go version: gzip output
// depends on compress/flate). Layers built from trees are held in memory,
// compressed; they are meant for small trees such as a pause image or test
// fixtures.
package winimage
