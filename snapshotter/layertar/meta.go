package layertar

import (
	"archive/tar"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// PAX record names used by go-winio's backuptar.
const (
	paxFileAttr     = "MSWINDOWS.fileattr"
	paxRawSD        = "MSWINDOWS.rawsd"
	paxSDDL         = "MSWINDOWS.sd"
	paxMountPoint   = "MSWINDOWS.mountpoint"
	paxEAPrefix     = "MSWINDOWS.xattr."
	paxWindowsPfx   = "MSWINDOWS."
	paxCreationTime = "LIBARCHIVE.creationtime"

	paxAtime = "atime"
	paxCtime = "ctime"

	// Stored keys for the standard atime/ctime records.
	keyAtime = "layertar.atime"
	keyCtime = "layertar.ctime"
)

// Windows file attributes.
const (
	fileAttrDirectory    = 0x10
	fileAttrArchive      = 0x20
	fileAttrReparsePoint = 0x400

	defaultFileAttr    = fileAttrArchive                        // 32
	defaultDirAttr     = fileAttrDirectory                      // 16
	defaultSymlinkAttr = fileAttrArchive | fileAttrReparsePoint // 1056
)

// records is the Windows metadata of one entry: stored key -> value. Keys
// are PAX record names (MSWINDOWS.*, LIBARCHIVE.creationtime) or
// keyAtime/keyCtime; values are the PAX values verbatim.
type records map[string]string

// isStoredKey reports whether key (without xattr namespace) is one of ours.
func isStoredKey(key string) bool {
	return strings.HasPrefix(key, paxWindowsPfx) || key == paxCreationTime || key == keyAtime || key == keyCtime
}

// parseRecords extracts and validates the Windows metadata of a header.
func parseRecords(hdr *tar.Header) (records, error) {
	var recs records
	// Sorted, so that the first reported problem does not depend on map order.
	keys := make([]string, 0, len(hdr.PAXRecords))
	for k := range hdr.PAXRecords {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := hdr.PAXRecords[k]
		key := k
		if isStoredKey(k) || k == paxAtime || k == paxCtime {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, errorf(ErrInvalidMetadata, "record %q is not valid UTF-8", k)
			}
		}
		switch {
		case k == paxFileAttr:
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				return nil, errorf(ErrInvalidMetadata, "%s=%q is not a decimal 32-bit number", k, v)
			}
		case k == paxRawSD:
			if err := checkSecurityDescriptor(v); err != nil {
				return nil, errorf(ErrInvalidMetadata, "%s: %v", k, err)
			}
		case k == paxSDDL:
			if v == "" {
				return nil, errorf(ErrInvalidMetadata, "%s is empty", k)
			}
		case strings.HasPrefix(k, paxEAPrefix):
			if len(k) == len(paxEAPrefix) {
				return nil, errorf(ErrInvalidMetadata, "extended attribute record without a name")
			}
			if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				return nil, errorf(ErrInvalidMetadata, "%s is not base64: %v", k, err)
			}
		case k == paxCreationTime:
			if _, err := parsePAXTime(v); err != nil {
				return nil, errorf(ErrInvalidMetadata, "%s=%q: %v", k, v, err)
			}
		case strings.HasPrefix(k, paxWindowsPfx):
			// Unknown MSWINDOWS.* record (including mountpoint): kept verbatim.
		case k == paxAtime:
			key = keyAtime // archive/tar already validated it
		case k == paxCtime:
			key = keyCtime
		default:
			continue
		}
		if recs == nil {
			recs = make(records)
		}
		recs[key] = v
	}
	return recs, nil
}

// fileAttr returns the MSWINDOWS.fileattr value, if present and valid.
func (r records) fileAttr() (uint32, bool) {
	v, ok := r[paxFileAttr]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// checkSecurityDescriptor checks that v is base64 of a self-relative
// SECURITY_DESCRIPTOR: revision 1, SE_SELF_RELATIVE set, and offsets of
// owner, group, SACL and DACL inside the buffer.
func checkSecurityDescriptor(v string) error {
	sd, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return fmt.Errorf("not base64: %w", err)
	}
	const hdrLen = 20
	if len(sd) < hdrLen {
		return fmt.Errorf("security descriptor of %d bytes is too short", len(sd))
	}
	if sd[0] != 1 {
		return fmt.Errorf("security descriptor revision %d", sd[0])
	}
	const seSelfRelative = 0x8000
	if binary.LittleEndian.Uint16(sd[2:4])&seSelfRelative == 0 {
		return errors.New("security descriptor is not self-relative")
	}
	for i := 4; i < hdrLen; i += 4 {
		off := binary.LittleEndian.Uint32(sd[i : i+4])
		if off != 0 && (off < hdrLen || off >= uint32(len(sd))) {
			return fmt.Errorf("security descriptor offset %d out of range", off)
		}
	}
	return nil
}

// parsePAXTime parses a PAX time value "%d[.%d]".
func parsePAXTime(s string) (time.Time, error) {
	ss, sn, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(ss, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("invalid PAX time")
	}
	if sn == "" {
		return time.Unix(secs, 0), nil
	}
	if strings.Trim(sn, "0123456789") != "" {
		return time.Time{}, errors.New("invalid PAX time")
	}
	if len(sn) < 9 {
		sn += strings.Repeat("0", 9-len(sn))
	} else {
		sn = sn[:9]
	}
	nsecs, _ := strconv.ParseInt(sn, 10, 64)
	if ss[0] == '-' {
		return time.Unix(secs, -nsecs), nil
	}
	return time.Unix(secs, nsecs), nil
}

// formatPAXTime formats t like archive/tar does for PAX records.
func formatPAXTime(t time.Time) string {
	secs, nsecs := t.Unix(), t.Nanosecond()
	if nsecs == 0 {
		return strconv.FormatInt(secs, 10)
	}
	sign := ""
	if secs < 0 {
		sign = "-"
		secs = -(secs + 1)
		nsecs = -(nsecs - 1e9)
	}
	return strings.TrimRight(fmt.Sprintf("%s%d.%09d", sign, secs, nsecs), "0")
}

// sidecarName is the metadata file used where xattrs or whiteout devices
// are not available. It lives at the top of the layer directory, outside
// Files/ and Hives/.
const sidecarName = "wclayer-metadata.json"

const sidecarVersion = 1

type sidecar struct {
	Version int                      `json:"version"`
	Entries map[string]*sidecarEntry `json:"entries"`
	// mu guards Entries while Import's file workers use it (an entry's
	// fields are only touched by whoever handles its name).
	mu sync.Mutex
}

type sidecarEntry struct {
	// Records are the entry's Windows metadata; they replace any xattrs.
	Records records `json:"records,omitempty"`
	// Whiteout marks a deleted name (the entry does not exist on disk).
	Whiteout bool `json:"whiteout,omitempty"`
	// Opaque marks a directory hiding the lower layers' content.
	Opaque bool `json:"opaque,omitempty"`
}

func (s *sidecar) entry(rel string) *sidecarEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Entries == nil {
		s.Entries = make(map[string]*sidecarEntry)
	}
	e := s.Entries[rel]
	if e == nil {
		e = &sidecarEntry{}
		s.Entries[rel] = e
	}
	return e
}

func (s *sidecar) get(rel string) *sidecarEntry {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Entries[rel]
}

func (s *sidecar) write(root *os.Root) error {
	for k, e := range s.Entries {
		if len(e.Records) == 0 && !e.Whiteout && !e.Opaque {
			delete(s.Entries, k)
		}
	}
	if len(s.Entries) == 0 {
		return nil
	}
	s.Version = sidecarVersion
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return err
	}
	return root.WriteFile(sidecarName, append(data, '\n'), 0o644)
}

// loadSidecar reads the sidecar of a layer directory; it returns nil if
// there is none.
func loadSidecar(root *os.Root) (*sidecar, error) {
	data, err := root.ReadFile(sidecarName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s sidecar
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", sidecarName, err)
	}
	if s.Version != sidecarVersion {
		return nil, fmt.Errorf("%s: unsupported version %d", sidecarName, s.Version)
	}
	return &s, nil
}
