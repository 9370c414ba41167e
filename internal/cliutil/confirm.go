package cliutil

import (
	"bufio"
	"os"
	"os/user"
	"strings"
)

// Confirm asks prompt on stderr and reads one line from stdin; anything but
// y/yes is a no (as is a closed stdin).
func Confirm(f *Factory, prompt string) bool {
	_, _ = f.IO.ErrOut.Write([]byte(prompt))
	line, _ := bufio.NewReader(f.IO.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// OSUser is the OS user name: the journalled identity of a manual action
// when --by is not given.
func OSUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}
