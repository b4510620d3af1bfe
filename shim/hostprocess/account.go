package hostprocess

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
)

// AccountKind is how ProcessSettings.User is run as.
type AccountKind int

const (
	// AccountSystem is NT AUTHORITY\SYSTEM: the shim's own token, which
	// must be SYSTEM's.
	AccountSystem AccountKind = iota + 1
	// AccountService is NT AUTHORITY\LOCAL SERVICE or NETWORK SERVICE: a
	// service logon.
	AccountService
	// AccountLocal is a local user or group (no domain, ".", or BUILTIN):
	// a group gets a temporary user made in it.
	AccountLocal
	// AccountDomain is a user of a domain.
	AccountDomain
)

// Account is ProcessSettings.User read: its kind, and the name and domain
// LogonUser takes.
type Account struct {
	Kind         AccountKind
	Name, Domain string
}

// ParseAccount reads a user as Kubernetes gives it (runAsUserName):
// NT AUTHORITY\SYSTEM, NT AUTHORITY\LOCAL SERVICE (or LocalService),
// NT AUTHORITY\NETWORK SERVICE (or NetworkService), in any letter case, a
// local user or group, or DOMAIN\user. The name and domain are kept as
// written: LogonUserW gets them as the kubelet passed them, as runhcs
// passes them (hcsshim internal/jobcontainers logon.go, processToken), and
// Windows resolves the spellings itself.
func ParseAccount(user string) (Account, error) {
	user = strings.TrimSpace(user)
	if user == "" {
		return Account{}, invalid(`no user to run as: set the pod's or container's securityContext.windowsOptions.runAsUserName (NT AUTHORITY\SYSTEM, NT AUTHORITY\LOCAL SERVICE, NT AUTHORITY\NETWORK SERVICE, a local user or a local group), or annotation microsoft.com/hostprocess-inherit-user=true`)
	}
	domain, name := "", user
	if i := strings.LastIndex(user, `\`); i >= 0 {
		domain, name = user[:i], user[i+1:]
	}
	if name == "" {
		return Account{}, invalid("user %q has no name after its domain", user)
	}
	switch {
	case strings.EqualFold(domain, "NT AUTHORITY"):
		switch wellKnown(name) {
		case "SYSTEM":
			return Account{Kind: AccountSystem, Name: name, Domain: domain}, nil
		case "LOCAL SERVICE", "NETWORK SERVICE":
			return Account{Kind: AccountService, Name: name, Domain: domain}, nil
		}
		return Account{}, invalid(`user %q: a HostProcess container runs as NT AUTHORITY\SYSTEM, NT AUTHORITY\LOCAL SERVICE or NT AUTHORITY\NETWORK SERVICE of the NT AUTHORITY accounts`, user)
	case domain == "", domain == ".", strings.EqualFold(domain, "BUILTIN"):
		return Account{Kind: AccountLocal, Name: name, Domain: domain}, nil
	}
	return Account{Kind: AccountDomain, Name: name, Domain: domain}, nil
}

// String is the account's one spelling: NT AUTHORITY\SYSTEM, LOCAL SERVICE
// and NETWORK SERVICE as Windows names them (LookupAccountSid), any other
// as written.
func (a Account) String() string {
	if a.Kind == AccountSystem || a.Kind == AccountService {
		return `NT AUTHORITY\` + wellKnown(a.Name)
	}
	if a.Domain == "" {
		return a.Name
	}
	return a.Domain + `\` + a.Name
}

// wellKnown is the NT AUTHORITY account name stands for, in Windows'
// spelling, or "": SYSTEM (or LocalSystem), LOCAL SERVICE and NETWORK
// SERVICE with or without the space, in any letter case.
func wellKnown(name string) string {
	switch strings.ToLower(strings.ReplaceAll(name, " ", "")) {
	case "system", "localsystem":
		return "SYSTEM"
	case "localservice":
		return "LOCAL SERVICE"
	case "networkservice":
		return "NETWORK SERVICE"
	}
	return ""
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}
