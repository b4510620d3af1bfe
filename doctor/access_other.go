//go:build !windows

package doctor

import (
	"fmt"
	"os"
	"syscall"
)

func (local) DirAccess(path string) (DirAccess, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return DirAccess{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return DirAccess{}, fmt.Errorf("no owner for %s", path)
	}
	return modeAccess(fi.Mode(), st.Uid, st.Gid), nil
}

// modeAccess reads a directory's mode bits: root is the administrator;
// its group and others may change it with the write bit, or read it.
func modeAccess(mode os.FileMode, uid, gid uint32) DirAccess {
	var a DirAccess
	if uid != 0 {
		a.Owner = fmt.Sprintf("uid %d", uid)
	}
	for _, c := range []struct {
		who         string
		write, read os.FileMode
	}{{fmt.Sprintf("group %d", gid), 0o020, 0o040}, {"others", 0o002, 0o004}} {
		switch {
		case c.who != "others" && gid == 0 && uid == 0:
			// root's own group.
		case mode&c.write != 0:
			a.Change = append(a.Change, c.who)
		case mode&c.read != 0:
			a.Read = append(a.Read, c.who)
		}
	}
	return a
}
