package jobcontainer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/hostprocess"
)

// systemSID is NT AUTHORITY\SYSTEM's.
const systemSID = "S-1-5-18"

// token is the logon token processes of user run with: the shim's own
// for the inherit-user annotation; one per user for the system's life
// otherwise, closed by Close.
func (s *system) token(ctx context.Context, user string) (handle, error) {
	key := strings.ToLower(strings.TrimSpace(user))
	if s.inheritUser {
		key = ""
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.tokens == nil {
		return 0, fmt.Errorf("HostProcess container %s has been closed: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	if t, ok := s.tokens[key]; ok {
		return t, nil
	}
	t, err := s.logon(ctx, user)
	if err != nil {
		return 0, err
	}
	s.tokens[key] = t
	return t, nil
}

// logon makes the token of user, as runhcs's processToken (hcsshim
// internal/jobcontainers logon.go), except for SYSTEM, which is the
// shim's own token: LogonUser does not log SYSTEM on.
func (s *system) logon(ctx context.Context, user string) (handle, error) {
	host := s.b.host
	if s.inheritUser {
		t, err := host.processToken()
		if err != nil {
			return 0, classify("the shim's own token (annotation microsoft.com/hostprocess-inherit-user)", err, host.facts(err))
		}
		return t, nil
	}
	a, err := hostprocess.ParseAccount(user)
	if err != nil {
		return 0, err
	}
	switch a.Kind {
	case hostprocess.AccountSystem:
		return s.systemToken()
	case hostprocess.AccountService:
		t, err := host.logonUser(a.Name, a.Domain, "", logonService)
		if err != nil {
			return 0, classify(fmt.Sprintf("log on as %s\\%s", a.Domain, a.Name), err, host.facts(err))
		}
		return t, nil
	case hostprocess.AccountLocal:
		group, err := host.localGroupExists(a.Name)
		if err != nil {
			return 0, classify(fmt.Sprintf("look for a local group %s", a.Name), err, host.facts(err))
		}
		if group {
			return s.groupMemberToken(ctx, a.Name)
		}
	}
	t, err := host.logonUser(a.Name, a.Domain, "", logonInteractive)
	if err != nil {
		if f := host.facts(err); f.LogonFailure {
			return 0, fmt.Errorf("log on as %s: %w: a named account logs on without its password, which a pod cannot give: run as a local group (a temporary member is made for the container), NT AUTHORITY\\LOCAL SERVICE or NT AUTHORITY\\NETWORK SERVICE: %w", user, err, errdefs.ErrFailedPrecondition)
		}
		return 0, classify(fmt.Sprintf("log on as %s", user), err, host.facts(err))
	}
	return t, nil
}

// systemToken is the shim's own token, which must be SYSTEM's: containerd
// runs as the LocalSystem service, and starts the shim as such.
func (s *system) systemToken() (handle, error) {
	host := s.b.host
	t, err := host.processToken()
	if err != nil {
		return 0, classify("the shim's own token, for NT AUTHORITY\\SYSTEM", err, host.facts(err))
	}
	sid, err := host.tokenUser(t)
	if err == nil && sid != systemSID {
		err = fmt.Errorf("the shim runs as %s, not as NT AUTHORITY\\SYSTEM (%s), and runs SYSTEM's processes with its own token: run containerd as the LocalSystem service, or choose another user: %w", sid, systemSID, errdefs.ErrFailedPrecondition)
	} else if err != nil {
		err = classify("read the user of the shim's token", err, host.facts(err))
	}
	if err != nil {
		host.closeHandle(t)
		return 0, err
	}
	return t, nil
}

// groupMemberToken makes a temporary user in the local group, as runhcs
// does, and logs it on. The user is recorded before it is made, so that a
// shim that dies leaves it to the next Open or Create of the id; Close
// deletes it.
func (s *system) groupMemberToken(ctx context.Context, group string) (handle, error) {
	host := s.b.host
	name := tempUserName(s.id, group)
	password, err := randomPassword()
	if err != nil {
		return 0, err
	}
	if err := s.recordUser(name); err != nil {
		return 0, err
	}
	err = host.addUser(name, password)
	if err != nil && host.facts(err).AlreadyExists {
		// Left by a shim of this id that died before it deleted it.
		if err = host.deleteUser(name); err == nil {
			err = host.addUser(name, password)
		}
	}
	if err != nil {
		s.dropUser(ctx, name)
		return 0, classify(fmt.Sprintf("make the temporary user %s for group %s", name, group), err, host.facts(err))
	}
	if err := host.addGroupMember(group, name); err != nil {
		s.dropUser(ctx, name)
		return 0, classify(fmt.Sprintf("add the temporary user %s to group %s", name, group), err, host.facts(err))
	}
	t, err := host.logonUser(name, ".", password, logonInteractive)
	if err != nil {
		s.dropUser(ctx, name)
		return 0, classify(fmt.Sprintf("log on as the temporary user %s of group %s (the group needs the right to log on locally)", name, group), err, host.facts(err))
	}
	log.G(ctx).WithFields(log.Fields{"id": s.id, "user": name, "group": group}).Info("made a temporary user for a HostProcess container")
	return t, nil
}

// tempUserName is the temporary user of container id in group: at most
// 20 characters (Windows' limit), the same for the same id and group.
func tempUserName(id, group string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + strings.ToLower(group)))
	return "hpc-" + hex.EncodeToString(sum[:])[:16]
}

// randomPassword is a password no one knows, with every kind of character
// a complexity policy asks for.
func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a password: %w", err)
	}
	return "Hp1!" + hex.EncodeToString(b), nil
}

// recordUser adds a temporary user to what the system holds.
func (s *system) recordUser(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.held.Users {
		if u == name {
			return nil
		}
	}
	h := s.held
	h.Users = append(append([]string(nil), h.Users...), name)
	if err := s.b.records.Write(s.id, h); err != nil {
		return err
	}
	s.held = h
	return nil
}

// dropUser deletes a temporary user that could not be used.
func (s *system) dropUser(ctx context.Context, name string) {
	if err := s.b.host.deleteUser(name); err != nil && !s.b.host.facts(err).NotExist {
		log.G(ctx).WithError(err).WithField("user", name).Warn("delete a temporary user that could not be used; Close deletes it")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var users []string
	for _, u := range s.held.Users {
		if u != name {
			users = append(users, u)
		}
	}
	h := s.held
	h.Users = users
	if err := s.b.records.Write(s.id, h); err != nil {
		log.G(ctx).WithError(err).Warn("record")
	}
	s.held = h
}
