//go:build unix

package keys

import (
	"os"
	"syscall"
)

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = s.Ino
	}
	return st, nil
}
