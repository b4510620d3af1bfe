//go:build windows

package jobcontainer

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The binding's accounts: logons, tokens, the user's environment, local
// users and groups. The rules of binding_windows.go hold here too.

func (winBinding) logonUser(user, domain, password string, logonType uint32) (handle, error) {
	u, err := windows.UTF16PtrFromString(user)
	if err != nil {
		return 0, err
	}
	d, err := utf16(domain)
	if err != nil {
		return 0, err
	}
	p, err := utf16(password)
	if err != nil {
		return 0, err
	}
	if err := find(procLogon); err != nil {
		return 0, err
	}
	var t windows.Token
	r, _, e := syscall.SyscallN(procLogon.Addr(), uintptr(unsafe.Pointer(u)), uintptr(unsafe.Pointer(d)), uintptr(unsafe.Pointer(p)), uintptr(logonType), 0, uintptr(unsafe.Pointer(&t)))
	if r == 0 {
		return 0, lastError(e)
	}
	return handle(t), nil
}

func (winBinding) processToken() (handle, error) {
	var t windows.Token
	err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ALL_ACCESS, &t)
	return handle(t), err
}

func (winBinding) tokenUser(token handle) (string, error) {
	u, err := windows.Token(token).GetTokenUser()
	if err != nil {
		return "", err
	}
	return u.User.Sid.String(), nil
}

func (winBinding) userEnvironment(token handle) ([]string, error) {
	var block *uint16
	if err := windows.CreateEnvironmentBlock(&block, windows.Token(token), false); err != nil {
		return nil, err
	}
	defer windows.DestroyEnvironmentBlock(block)
	// NUL-terminated strings, ended by an empty one; the block is
	// Windows' memory.
	var env []string
	for p := unsafe.Pointer(block); ; {
		s := windows.UTF16PtrToString((*uint16)(p))
		if s == "" {
			return env, nil
		}
		env = append(env, s)
		n := 0
		for *(*uint16)(unsafe.Add(p, 2*n)) != 0 {
			n++
		}
		p = unsafe.Add(p, 2*(n+1))
	}
}

// Net API status codes.
const (
	nerrGroupNotFound  = 2220
	nerrUserNotFound   = 2221
	errorNoSuchAlias   = 1376
	errorMemberInAlias = 1378
)

func (winBinding) localGroupExists(name string) (bool, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return false, err
	}
	if err := find(procLGGI); err != nil {
		return false, err
	}
	var buf *byte
	r, _, _ := syscall.SyscallN(procLGGI.Addr(), 0, uintptr(unsafe.Pointer(n)), 0, uintptr(unsafe.Pointer(&buf)))
	if buf != nil {
		syscall.SyscallN(procNBuf.Addr(), uintptr(unsafe.Pointer(buf)))
	}
	switch r {
	case 0:
		return true, nil
	case nerrGroupNotFound, errorNoSuchAlias:
		return false, nil
	}
	return false, netError(r)
}

// userInfo1 is USER_INFO_1.
type userInfo1 struct {
	Name        *uint16
	Password    *uint16
	PasswordAge uint32
	Priv        uint32
	HomeDir     *uint16
	Comment     *uint16
	Flags       uint32
	ScriptPath  *uint16
}

// USER_PRIV_USER; UF_SCRIPT (required), UF_NORMAL_ACCOUNT,
// UF_DONT_EXPIRE_PASSWD.
const (
	userPrivUser   = 1
	userFlags      = 0x0001 | 0x0200 | 0x10000
	userCommentTxt = "temporary user of a winproc HostProcess container"
)

func (winBinding) addUser(name, password string) error {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(password)
	if err != nil {
		return err
	}
	c, err := windows.UTF16PtrFromString(userCommentTxt)
	if err != nil {
		return err
	}
	if err := find(procUAdd); err != nil {
		return err
	}
	info := userInfo1{Name: n, Password: p, Priv: userPrivUser, Comment: c, Flags: userFlags}
	r, _, _ := syscall.SyscallN(procUAdd.Addr(), 0, 1, uintptr(unsafe.Pointer(&info)), 0)
	return netError(r)
}

func (winBinding) addGroupMember(group, user string) error {
	g, err := windows.UTF16PtrFromString(group)
	if err != nil {
		return err
	}
	u, err := windows.UTF16PtrFromString(user)
	if err != nil {
		return err
	}
	if err := find(procLGAM); err != nil {
		return err
	}
	// LOCALGROUP_MEMBERS_INFO_3: the member by name.
	members := []*uint16{u}
	r, _, _ := syscall.SyscallN(procLGAM.Addr(), 0, uintptr(unsafe.Pointer(g)), 3, uintptr(unsafe.Pointer(&members[0])), 1)
	if r == errorMemberInAlias {
		return nil
	}
	return netError(r)
}

func (winBinding) deleteUser(name string) error {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return err
	}
	if err := find(procUDel); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(procUDel.Addr(), 0, uintptr(unsafe.Pointer(n)))
	if r == nerrUserNotFound {
		return errUserNotFound
	}
	return netError(r)
}
