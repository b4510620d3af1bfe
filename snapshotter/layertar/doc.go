// Package layertar imports and exports Windows container layer tars in a
// portable way.
//
// On Windows the differ imports layers with hcsshim's
// ociwclayer.ImportLayerFromTar, which needs the Windows layer APIs. This
// package is the portable counterpart used by the Linux test/dev emulation:
// it unpacks the same tar format into a plain directory tree and writes that
// tree back out as a Windows-format layer tar.
//
// # Tar format
//
// A Windows layer tar (as written by go-winio's backuptar) holds:
//
//   - Files/...: the layer's file system, Windows paths written with '/'.
//   - Hives/...: registry hive files of base layers (Hives/SOFTWARE_BASE, ...).
//   - UtilityVM/...: the Hyper-V utility VM; process isolation does not use
//     it, so Import skips it entirely.
//
// Windows metadata travels in PAX records: MSWINDOWS.fileattr (decimal file
// attributes), MSWINDOWS.rawsd (base64 self-relative security descriptor),
// MSWINDOWS.sd (legacy SDDL), MSWINDOWS.mountpoint (the symlink is a mount
// point/junction), MSWINDOWS.xattr.<name> (base64 extended attribute values),
// LIBARCHIVE.creationtime, plus the standard atime/ctime. An alternate data
// stream "s" of file "f" is a regular entry named "f:s" following "f".
// A file named ".wh.<name>" deletes <name> from the lower layers (a
// tombstone on Windows), hard links are Link entries and reparse points are
// Symlink entries.
//
// # On-disk representation
//
// Import writes Files/ and Hives/ as plain directories under the layer
// directory (Files/ is always created, so that it can be used as an overlay
// lowerdir). Files are created 0644, directories 0755; tar uid/gid/mode bits
// are ignored (Windows has no Unix permissions). An alternate data stream
// "f:s" is stored as the file "f:s" next to f (':' is rejected in any other
// name, so the exporter can tell streams apart and writes them right after f).
//
// Windows metadata is stored in extended attributes named after the PAX
// record, holding the record's value verbatim (so MSWINDOWS.rawsd stays
// base64 text):
//
//	user.MSWINDOWS.fileattr, user.MSWINDOWS.rawsd, user.MSWINDOWS.sd,
//	user.MSWINDOWS.mountpoint, user.MSWINDOWS.xattr.<name>,
//	user.LIBARCHIVE.creationtime,
//	user.layertar.atime, user.layertar.ctime  (the PAX atime/ctime values)
//
// Linux does not allow user.* attributes on symlinks, so for symlinks the same
// names are used in the trusted.* namespace (requires CAP_SYS_ADMIN).
// Modification times are the files' own mtimes. Extended attributes survive
// an overlayfs copy-up, so metadata of files modified in a container is still
// there when the upper directory is exported with ExportDiff.
//
// Where an attribute cannot be stored (no xattr support, value too large, a
// symlink without CAP_SYS_ADMIN, or a platform without xattrs), the entry's
// records are written instead to the sidecar file "wclayer-metadata.json" at
// the top of the layer directory (outside Files/ and Hives/, so it is never
// part of the mounted file system). Export reads both: sidecar records win
// over attributes.
//
// Whiteouts use the overlayfs representation so that an overlay mount whose
// lowerdirs are the Files/ directories of several imported layers honours
// them: ".wh.<name>" becomes a 0/0 character device <name> in the same
// directory (created with mknod; needs root or Linux >= 5.8 in a user
// namespace). When a layer both deletes a directory and recreates it
// (".wh.<dir>" plus entries under <dir>), or contains the OCI marker
// ".wh..wh..opq", the directory is made opaque with trusted.overlay.opaque=y
// (user.overlay.opaque=y when trusted.* cannot be set, for userxattr mounts).
// A whiteout of a name that does not exist in this layer is normal (it
// deletes something from a lower layer) and is not an error. On platforms
// without mknod/xattrs, whiteouts and opaque directories are recorded in the
// sidecar instead.
//
// Symlink targets are stored verbatim except that '/' is turned into '\'.
// Windows treats both as separators, so the layer means the same thing, but
// on Linux the link can never name a path outside its own directory: the
// whole target is a single (odd looking) file name. Targets "." and ".." are
// rejected. Import never follows a symlink.
//
// # Safety
//
// Import resolves every path with os.Root inside the layer directory, checks
// that every parent component is a real directory (never a symlink), creates
// files with O_EXCL and never writes through an existing entry. It rejects,
// with an *EntryError naming the tar entry: "..", "." and empty components,
// absolute paths, drive letters, backslashes, NUL, invalid UTF-8, names
// outside Files/, Hives/ and UtilityVM/, ':' other than in an alternate data
// stream name, hard links whose target is outside the layer, not a file or
// an alternate data stream, duplicate entries, whiteouts outside Files/ or
// escaping it, ".wh." names used as directories, entries larger than the
// configured limit (the declared size is never used to preallocate),
// undecodable MSWINDOWS records,
// unsupported entry types (devices, fifos, sparse files) and truncated or
// corrupt archives, including a stream that stops at an entry boundary
// without the end-of-archive blocks (an empty stream is accepted as an empty
// layer). Errors match the errdefs classes (InvalidArgument, NotImplemented)
// and the sentinels ErrUnsafePath, ErrInvalidEntry, ErrInvalidMetadata,
// ErrEntryTooLarge, ErrCorruptArchive and ErrUnsupported. Directories created
// implicitly (no entry of their own) get the mtime of the entry that needed
// them, so importing the same tar twice exports identically.
//
// On error, Import leaves whatever it had written so far inside the layer
// directory only; callers discard the directory (os.RemoveAll removes
// whiteout devices too).
//
// Import does not fsync; callers that need durability sync the file system
// once after the import.
//
// Import creates and writes regular files in two worker goroutines while it
// reads and checks the entries that follow (creating files is most of an
// import's time); an entry that concerns a file still being created waits
// for it, so the checks and the result are a sequential import's.
//
// # Export
//
// Export walks a layer directory (written by Import, or any tree with Files/
// and optionally Hives/) and writes a Windows-format tar: PAX records are
// restored from the stored attributes (default MSWINDOWS.fileattr 32 for
// files, 16 for directories, 1056 for symlinks, LIBARCHIVE.creationtime
// and atime/ctime default to the mtime), whiteout devices become ".wh."
// entries, opaque directories become ".wh.<dir>" followed by the directory,
// files sharing an inode become Link entries, and alternate data streams
// follow their file. Entries are written depth first in byte order of their
// names, so the output only depends on the tree; WithTimestamp also fixes all
// times. FromTree builds a layer tar from a plain source tree (mapped to
// Files/), and ExportDiff exports an overlayfs upper directory (the changes
// of a container against its lower layers).
package layertar
