package devcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/omlhq/oml/internal/pgdev"
)

// layout is where one working directory's dev cluster lives.
type layout struct {
	Root      string // <dir>/.oml
	DataDir   string
	SocketDir string
	LakeDir   string
	StateFile string
}

func newLayout(dir string) (layout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return layout{}, fmt.Errorf("cannot resolve the directory %s: %w", dir, err)
	}
	root := filepath.Join(abs, ".oml")
	return layout{
		Root:      root,
		DataDir:   filepath.Join(root, "pgdata"),
		SocketDir: pgdev.SocketDirFor(filepath.Join(root, "run")),
		LakeDir:   filepath.Join(root, "lake"),
		StateFile: filepath.Join(root, "dev.json"),
	}, nil
}

// LakeURL is the file:// URL of the default lake.
func (l layout) LakeURL() string {
	return (&url.URL{Scheme: "file", Path: l.LakeDir}).String()
}

// state is .oml/dev.json: what the last `dev up` was asked for.
type state struct {
	Database string `json:"database"`
	// Port is the TCP port asked for with --port (0 with TCP: a free one).
	Port int  `json:"port,omitempty"`
	TCP  bool `json:"tcp"`
}

func readState(l layout) (state, error) {
	b, err := os.ReadFile(l.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return state{Database: defaultDatabase}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("cannot read %s: %w", l.StateFile, err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return state{}, fmt.Errorf("%s is not valid JSON (%v); fix or delete it and run `oml dev up` again", l.StateFile, err)
	}
	if s.Database == "" {
		s.Database = defaultDatabase
	}
	return s, nil
}

func writeState(l layout, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := l.StateFile + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", tmp, err)
	}
	return os.Rename(tmp, l.StateFile)
}

// shellQuote renders s as one single-quoted POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
