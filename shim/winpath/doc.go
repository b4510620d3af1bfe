// Package winpath holds the Windows path rules of a container's mounts:
// what an absolute host path is (a drive, UNC or device path, or a POSIX
// path for the Linux emulation), how a path inside the container is
// normalised (ContainerPath), named pipe paths (PipeName), and where an
// absolute program path lies below the image's C:\ (SystemDrivePath).
package winpath
