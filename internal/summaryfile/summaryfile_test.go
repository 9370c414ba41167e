package summaryfile_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/summaryfile"
)

func lines(t *testing.T, data []byte, max int) ([]string, error) {
	t.Helper()
	var out []string
	err := summaryfile.Open(data, "fmt v1 ", "k", max, func(_ int, s string) error {
		if s == "bad" {
			return errors.New("does not parse")
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func TestSealThenOpen_RoundTripsAndRefusesAnyOtherObjectWhole(t *testing.T) {
	w := summaryfile.NewWriter("fmt v1 ", 0)
	w.Body.WriteString("a\tb\nc\n")
	obj := append([]byte(nil), w.Seal()...)
	got, err := lines(t, obj, 1<<20)
	require.NoError(t, err)
	require.Equal(t, []string{"a\tb", "c"}, got)

	edited := append([]byte(nil), obj...)
	edited[len(edited)-2] = 'd'
	_, err = lines(t, edited, 1<<20)
	require.ErrorContains(t, err, "does not hash to its header")
	_, err = lines(t, obj, 10)
	require.ErrorContains(t, err, "larger than")
	err = summaryfile.Open(obj, "other v1 ", "k", 1<<20, func(int, string) error { return nil })
	require.ErrorContains(t, err, "does not hash to its header")

	w = summaryfile.NewWriter("fmt v1 ", 0)
	w.Body.WriteString("ok\nbad\n")
	_, err = lines(t, w.Seal(), 1<<20)
	require.ErrorContains(t, err, "k line 3: does not parse")
}
