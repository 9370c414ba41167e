package summaryfile

import (
	"context"
	"errors"

	"github.com/omlhq/oml/internal/lake/store"
)

// Load reads the summary object key from st and Opens it against header
// and max, calling line for each body line. size is the object's length (0
// when it could not be read), for the next Writer's size.
func Load(ctx context.Context, st store.Store, key, header string, max int, line func(n int, s string) error) (size int, err error) {
	data, err := st.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	return len(data), Open(data, header, key, max, line)
}

// State names how a Load went, for a report: "absent" (no summary yet),
// "invalid: why" (unreadable, or refused whole), or "ok".
func State(err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "absent"
	case err != nil:
		return "invalid: " + err.Error()
	default:
		return "ok"
	}
}
