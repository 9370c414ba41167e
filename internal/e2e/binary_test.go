package e2e_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// The contract of some items is the process's exit status and the bytes on
// a real terminal, so these tests run the real binary: built once per test
// binary (go build, cached by the Go build cache) into a scratch directory.
var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func omlBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "oml-e2e-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "oml")
		_, file, _, _ := runtime.Caller(0)
		repo := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/oml")
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = errors.New("go build ./cmd/oml: " + err.Error() + ": " + string(out))
		}
	})
	require.NoError(t, binErr)
	return binPath
}

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// environ is a minimal environment for the binary: PATH and HOME (Go and
// PostgreSQL tools need them), TERM, and e.
func (e env) environ() []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERM=xterm"}
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// bin runs the real oml binary with pipes for stdout and stderr (not a
// terminal) and returns its exit status and output.
func (e env) bin(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(omlBinary(t), args...)
	cmd.Env = e.environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{cliutil.ExitCode(code), out.String(), errOut.String()}
}

// tty runs the real binary on a pseudo-terminal of the given width (stdin,
// stdout and stderr all on it, as in an interactive shell) and returns the
// exit status and everything written to the terminal. input, if not empty,
// is typed once the process has started.
func (e env) tty(t *testing.T, cols int, input string, args ...string) result {
	t.Helper()
	cmd := exec.Command(omlBinary(t), args...)
	cmd.Env = e.environ()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: uint16(cols)})
	require.NoError(t, err)
	defer ptmx.Close()
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&buf, ptmx) // ends with EIO once the child has exited
		close(copied)
	}()
	if input != "" {
		_, err := ptmx.Write([]byte(input))
		require.NoError(t, err)
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	select {
	case <-copied:
	case <-time.After(10 * time.Second): // a grandchild holding the pty open
		ptmx.Close()
		<-copied
	}
	return result{cliutil.ExitCode(code), strings.ReplaceAll(buf.String(), "\r\n", "\n"), ""}
}
