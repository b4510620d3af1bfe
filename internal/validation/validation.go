// Package validation holds the rules Windows itself puts on what a pod or
// container asks for, in one place: the shim's spec translation
// (shim/specconv) for every container and exec in both sandbox modes, the
// CRI pod settings (cri) and each backend's process start (shim/hcs,
// shim/jobcontainer, shim/emulation) call it, so that a config gets the
// same refusal, naming the same field, whichever path it takes.
//
// Each refusal is errdefs.ErrInvalidArgument and names the field as the
// caller calls it and as CRI calls it (command and args, envs,
// run_as_username), with the limit and the fix. Lengths are counted as
// Windows counts them: in UTF-16 code units (WCHARs).
package validation

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/containerd/errdefs"
)

const (
	// MaxCommandLine is the longest command line CreateProcessW takes:
	// "The maximum length of this string is 32,767 characters, including
	// the Unicode terminating null character" (CreateProcessW,
	// lpCommandLine), so 32,766 characters of text.
	MaxCommandLine = 32766
	// MaxEnvValue is the longest value of one environment variable: "The
	// maximum size of a user-defined environment variable is 32,767
	// characters" (SetEnvironmentVariableW, lpValue; "Environment
	// Variables" in the Windows docs).
	MaxEnvValue = 32767
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}

// Length is s's length as Windows counts it: UTF-16 code units. A byte
// that is not UTF-8 counts as one (it becomes U+FFFD).
func Length(s string) int {
	n := 0
	for _, r := range s {
		if l := utf16.RuneLen(r); l > 0 {
			n += l
		} else {
			n++
		}
	}
	return n
}

// CommandLine refuses a command line CreateProcess would not take: longer
// than MaxCommandLine, or holding a NUL, which would end it early. field
// names where it came from (for example "spec.process.args").
func CommandLine(line, field string) error {
	if strings.ContainsRune(line, 0) {
		return invalid("%s (CRI command and args) contains a NUL character, which would end the Windows command line there: remove it", field)
	}
	if n := Length(line); n > MaxCommandLine {
		return invalid("%s (CRI command and args) make a command line of %d characters; CreateProcess takes at most %d (%d with the terminating NUL): shorten the command, or pass the data in a file or a volume", field, n, MaxCommandLine, MaxCommandLine+1)
	}
	return nil
}

// Env refuses an environment Windows would not take or would change:
// an entry that is not NAME=VALUE, a NUL in a name or value (it ends the
// entry in the environment block), or a value longer than MaxEnvValue.
// field names the list (for example "spec.process.env"); the index is the
// list's.
func Env(env []string, field string) error {
	for i, e := range env {
		name, value, ok := strings.Cut(e, "=")
		where := fmt.Sprintf("%s[%d] (CRI envs)", field, i)
		switch {
		case strings.ContainsRune(e, 0):
			return invalid("%s, variable %q, contains a NUL character, which ends a variable in Windows' environment block: remove it", where, strings.ReplaceAll(name, "\x00", `\x00`))
		case !ok:
			return invalid("%s is %q, which has no '=': write it as NAME=VALUE", where, e)
		case name == "":
			return invalid("%s is %q, which has no name before '=': write it as NAME=VALUE", where, e)
		}
		if n := Length(value); n > MaxEnvValue {
			return invalid("%s, variable %q, has a value of %d characters; Windows takes at most %d for one variable (SetEnvironmentVariable): shorten it, or pass the data in a file or a volume", where, name, n, MaxEnvValue)
		}
	}
	return nil
}

// UserName says what is wrong with a Windows user name as the Kubernetes
// API server checks runAsUserName (user or DOMAIN\user), "" if nothing.
func UserName(u string) string {
	if n := utf8.RuneCountInString(u); n > 256 {
		return fmt.Sprintf("is %d characters long, more than 256", n)
	}
	if strings.ContainsFunc(u, unicode.IsControl) {
		return "contains control characters"
	}
	parts := strings.Split(u, `\`)
	if len(parts) > 2 {
		return `has more than one backslash: write user or DOMAIN\user`
	}
	user := parts[len(parts)-1]
	if len(parts) == 2 {
		domain := parts[0]
		if domain == "" {
			return `has an empty domain before the backslash: write user or DOMAIN\user`
		}
		if strings.ContainsAny(domain, `/:*?"<>|`) || strings.HasPrefix(domain, ".") {
			return fmt.Sprintf("has the domain %q, which is neither a NetBIOS nor a DNS domain name", domain)
		}
	}
	switch {
	case user == "":
		return `has no user name: write user or DOMAIN\user`
	case utf8.RuneCountInString(user) > 104:
		return "has a user name longer than 104 characters"
	case strings.ContainsAny(user, `"/\[]:;|=,+*?<>@`):
		return `has a user name with one of the characters "/\[]:;|=,+*?<>@, which Windows user names cannot contain (a domain is separated by a backslash: DOMAIN\user)`
	case strings.Trim(user, ". ") == "":
		return "has a user name of only dots and spaces"
	}
	return ""
}

// User refuses a user name UserName finds wrong; "" (the image's user) is
// accepted. field names where it came from (for example
// "spec.process.user.username").
func User(u, field string) error {
	if u == "" {
		return nil
	}
	if why := UserName(u); why != "" {
		return invalid("%s %q (CRI run_as_username, spec.securityContext.windowsOptions.runAsUserName) %s", field, u, why)
	}
	return nil
}

// Process is CommandLine and Env for a process a backend is about to
// start: its command line as the backend will pass it to CreateProcess,
// and its environment.
func Process(commandLine string, env []string) error {
	if err := CommandLine(commandLine, "the process's command line"); err != nil {
		return err
	}
	return Env(env, "the process's env")
}
