//go:build windows

package doctor

import (
	"slices"
	"unsafe"

	"golang.org/x/sys/windows"
)

func (local) DirAccess(path string) (DirAccess, error) {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return DirAccess{}, err
	}
	return accessOf(sd, adminSelf())
}

// adminSelf is the account doctor runs as, when that account is an
// administrator (doctor runs elevated): a directory it owns is the
// administrators'. nil when doctor runs as another account.
func adminSelf() *windows.SID {
	ba, err := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err != nil {
		return nil
	}
	if ok, err := windows.Token(0).IsMember(ba); err != nil || !ok {
		return nil
	}
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil
	}
	return u.User.Sid
}

// changeRights are the rights on a directory that let a holder change what
// is in it or who may use it: GENERIC_ALL and GENERIC_WRITE, adding files
// and subdirectories, writing attributes, deleting children or itself,
// and changing its security descriptor or owner.
const changeRights = windows.GENERIC_ALL | windows.GENERIC_WRITE | windows.FILE_WRITE_DATA |
	windows.FILE_APPEND_DATA | windows.FILE_WRITE_EA | fileDeleteChild |
	windows.FILE_WRITE_ATTRIBUTES | windows.DELETE | windows.WRITE_DAC | windows.WRITE_OWNER

// fileDeleteChild is FILE_DELETE_CHILD.
const fileDeleteChild = 0x40

// trustedSIDs may use winproc's state: Administrators, SYSTEM,
// TrustedInstaller (which owns the system's files), and CREATOR OWNER,
// whose entries only pass on to what an entitled user creates.
var trustedSIDs = []string{"S-1-5-32-544", "S-1-5-18", "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464", "S-1-3-0"}

// accessOf reads the owner and the allowing entries of a directory's
// security descriptor; admin, when not nil, is trusted as Administrators
// are.
func accessOf(sd *windows.SECURITY_DESCRIPTOR, admin *windows.SID) (DirAccess, error) {
	trusted := func(sid *windows.SID) bool {
		return trustedSID(sid) || (admin != nil && windows.EqualSid(sid, admin))
	}
	var a DirAccess
	owner, _, err := sd.Owner()
	if err != nil {
		return a, err
	}
	if owner != nil && !trusted(owner) {
		a.Owner = account(owner)
	}
	dacl, _, err := sd.DACL()
	if err != nil && err != windows.ERROR_OBJECT_NOT_FOUND {
		return a, err
	}
	if dacl == nil {
		// No DACL at all: everyone may do anything.
		a.Change = append(a.Change, "Everyone (the directory has no access list)")
		return a, nil
	}
	change, read, made := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := uint32(0); i < uint32(dacl.AceCount); i++ {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return a, err
		}
		if ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE {
			continue
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		if trusted(sid) {
			continue
		}
		name := account(sid)
		flags := ace.Header.AceFlags
		writes := uint32(ace.Mask)&changeRights != 0
		// An inheritable entry passes on to what is made in the directory
		// later (a record is a file: object inherit; container inherit
		// for what is made in subdirectories); an inherit-only one applies
		// to nothing else.
		if writes && flags&(windows.OBJECT_INHERIT_ACE|windows.CONTAINER_INHERIT_ACE) != 0 {
			made[name] = true
		}
		switch {
		case flags&windows.INHERIT_ONLY_ACE != 0:
		case writes:
			change[name] = true
		default:
			read[name] = true
		}
	}
	for name := range made {
		if !change[name] {
			a.ChangeMade = append(a.ChangeMade, name)
		}
	}
	slices.Sort(a.ChangeMade)
	for name := range change {
		a.Change = append(a.Change, name)
		delete(read, name)
	}
	for name := range read {
		a.Read = append(a.Read, name)
	}
	slices.Sort(a.Change)
	slices.Sort(a.Read)
	return a, nil
}

func trustedSID(sid *windows.SID) bool {
	for _, s := range trustedSIDs {
		if t, err := windows.StringToSid(s); err == nil && windows.EqualSid(sid, t) {
			return true
		}
	}
	return false
}

// account names sid as DOMAIN\name, or by the SID when it has no name.
func account(sid *windows.SID) string {
	name, domain, _, err := sid.LookupAccount("")
	switch {
	case err != nil || name == "":
		return sid.String()
	case domain != "":
		return domain + `\` + name
	}
	return name
}
