package cliutil

import (
	"bufio"
	"os"
	"os/user"
	"strings"

	"github.com/omlhq/oml/internal/iostreams"
)

// Confirm asks prompt on stderr and reads one line from stdin; anything but
// y/yes is a no (as is a closed stdin).
func Confirm(io *iostreams.IOStreams, prompt string) bool {
	_, _ = io.ErrOut.Write([]byte(prompt))
	line, _ := bufio.NewReader(io.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// Confirmed is the prompt of a command that changes the journal: true at
// once when yes (--yes), else it asks (Confirm) and, on a no, says
// declined on stderr. Declining is a decision, not a problem: the caller
// exits 0.
func Confirmed(io *iostreams.IOStreams, yes bool, prompt, declined string) bool {
	if yes || Confirm(io, prompt) {
		return true
	}
	_, _ = io.ErrOut.Write([]byte(declined + "\n"))
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

// JournalledBy is a --by value, else the OS user: the identity a manual
// action journals. Neither is a usage error (exit 2).
func JournalledBy(by string) (string, error) {
	if by == "" {
		by = OSUser()
	}
	if strings.TrimSpace(by) == "" {
		return "", FlagErrorf("cannot tell who you are: pass --by NAME (it is journalled)")
	}
	return by, nil
}
