// The fake host's accounts, volume mount points, layers and files.

package jobcontainer

import (
	"strconv"
	"strings"

	"github.com/winproc/winproc/shim/hostprocess"
)

func (f *fakeHost) logonUser(user, domain, password string, logonType uint32) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("logonUser", domain+`\`+user, strconv.Itoa(int(logonType))); err != nil {
		return 0, err
	}
	if strings.EqualFold(domain, "NT AUTHORITY") && (!serviceAccounts[strings.ToLower(user)] || logonType != logonService) {
		return 0, errorLogonFailure
	}
	return f.newHandle(fakeToken(domain + `\` + user)), nil
}

// serviceAccounts are the NT AUTHORITY names a service logon takes, as
// Windows compares account names, without case: the accounts' own names
// (LookupAccountSid of S-1-5-19 and S-1-5-20) and the names services are
// configured with (CreateServiceW's lpServiceStartName).
var serviceAccounts = map[string]bool{"local service": true, "localservice": true, "network service": true, "networkservice": true}

func (f *fakeHost) processToken() (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("processToken"); err != nil {
		return 0, err
	}
	return f.newHandle(fakeToken("shim")), nil
}

func (f *fakeHost) tokenUser(token handle) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(token)
	return f.ownSID, f.callLocked("tokenUser")
}

func (f *fakeHost) userEnvironment(token handle) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.get(token).(fakeToken)
	if err := f.callLocked("userEnvironment"); err != nil {
		return nil, err
	}
	return append(append([]string(nil), f.profile...), "USERNAME="+string(t)), nil
}

func (f *fakeHost) localGroupExists(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groups[strings.ToLower(name)], f.callLocked("localGroupExists", name)
}

func (f *fakeHost) addUser(name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("addUser", name); err != nil {
		return err
	}
	if len(name) > 20 || len(password) < 14 {
		f.t.Errorf("user %q (at most 20 characters), password of %d characters", name, len(password))
	}
	if _, ok := f.users[name]; ok {
		return nerrUserExists
	}
	f.users[name] = ""
	return nil
}

func (f *fakeHost) addGroupMember(group, user string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("addGroupMember", group, user); err != nil {
		return err
	}
	f.users[user] = group
	return nil
}

func (f *fakeHost) deleteUser(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("deleteUser", name); err != nil {
		return err
	}
	if _, ok := f.users[name]; !ok {
		return errUserNotFound
	}
	delete(f.users, name)
	return nil
}

func (f *fakeHost) setVolumeMountPoint(dir, volume string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("setVolumeMountPoint", dir, volume); err != nil {
		return err
	}
	if !strings.HasSuffix(dir, `\`) || !f.files[strings.ToLower(strings.TrimSuffix(dir, `\`))] {
		f.t.Errorf("mount point %q: not an existing directory with a trailing backslash", dir)
	}
	dir = strings.TrimSuffix(dir, `\`)
	f.mounts[strings.ToLower(dir)] = volume
	for _, p := range f.image {
		f.addPathLocked(hostprocess.Join(dir, p), false)
	}
	return nil
}

func (f *fakeHost) deleteVolumeMountPoint(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("deleteVolumeMountPoint", dir); err != nil {
		return err
	}
	key := strings.ToLower(strings.TrimSuffix(dir, `\`))
	if _, ok := f.mounts[key]; !ok {
		return errorNotAReparsePoint
	}
	delete(f.mounts, key)
	for p := range f.files {
		if strings.HasPrefix(p, key+`\`) {
			delete(f.files, p)
		}
	}
	return nil
}

func (f *fakeHost) activeProcessors() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callLocked("activeProcessors")
	return f.cpus
}

func (f *fakeHost) windowsDirectory() (string, error) {
	return `C:\Windows`, f.call("windowsDirectory")
}

// The layer functions.

func (f *fakeHost) Activate(path string) error { return f.call("activate", path) }
func (f *fakeHost) Prepare(path string, parents []string) error {
	return f.call("prepare", append([]string{path}, parents...)...)
}
func (f *fakeHost) MountPath(path string) (string, error) {
	if err := f.call("mountPath", path); err != nil {
		return "", err
	}
	return f.volume, nil
}
func (f *fakeHost) Unprepare(path string) error  { return f.call("unprepare", path) }
func (f *fakeHost) Deactivate(path string) error { return f.call("deactivate", path) }
func (f *fakeHost) Expand(path string, size uint64) error {
	return f.call("expand", path, strconv.FormatUint(size, 10))
}

// The file system.

func (f *fakeHost) addPathLocked(p string, dir bool) {
	p = strings.ToLower(p)
	f.files[p] = dir
	for i := strings.LastIndex(p, `\`); i > 2; i = strings.LastIndex(p[:i], `\`) {
		f.files[p[:i]] = true
	}
}

func (f *fakeHost) isFile(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir, ok := f.files[strings.ToLower(path)]
	return ok && !dir
}

func (f *fakeHost) isDir(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[strings.ToLower(path)]
}

func (f *fakeHost) mkdirAll(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("mkdirAll", path); err != nil {
		return err
	}
	f.addPathLocked(path, true)
	return nil
}

func (f *fakeHost) symlink(target, link string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("symlink", target, link); err != nil {
		return err
	}
	if _, ok := f.files[strings.ToLower(link)]; ok {
		return errorAlreadyExists
	}
	f.links[strings.ToLower(link)] = target
	f.addPathLocked(link, true)
	return nil
}

func (f *fakeHost) isLink(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.links[strings.ToLower(path)]
	return ok
}

func (f *fakeHost) remove(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("remove", path); err != nil {
		return err
	}
	key := strings.ToLower(path)
	if _, ok := f.files[key]; !ok {
		return errorFileNotFound
	}
	delete(f.files, key)
	delete(f.links, key)
	return nil
}
