package delta

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// checkpointReadSchema is what oml projects out of a checkpoint: the
// columns it writes plus the ones whose presence it must refuse
// (deletion vectors, v2-checkpoint sidecars). Absent columns read as null.
var checkpointReadSchema = pq.NewSchema(
	pq.Nullable("txn", checkpointTxn),
	pq.Nullable("add", pq.StructOf(append(append([]pq.Field(nil), checkpointAdd.Fields...),
		pq.Nullable("deletionVector", pq.StructOf(pq.Nullable("storageType", pq.String), pq.Nullable("pathOrInlineDv", pq.String),
			pq.Nullable("sizeInBytes", pq.Int32), pq.Nullable("cardinality", pq.Int64))))...)),
	pq.Nullable("remove", checkpointRemove),
	pq.Nullable("metaData", checkpointMetaData),
	pq.Nullable("protocol", checkpointProtocol),
	pq.Nullable("sidecar", pq.StructOf(pq.Nullable("path", pq.String))),
	pq.Nullable("checkpointMetadata", pq.StructOf(pq.Nullable("version", pq.Int64))),
)

// readCheckpoint streams the actions of a classic (single or multi-part)
// checkpoint to fn, part by part, in row batches.
func readCheckpoint(ctx context.Context, st store.Store, cp *checkpointRef, fn func(*Action) error) error {
	for _, key := range cp.keys {
		if err := readCheckpointPart(ctx, st, key, fn); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

func readCheckpointPart(ctx context.Context, st store.Store, key string, fn func(*Action) error) error {
	obj, err := st.Open(ctx, key)
	if err != nil {
		return err
	}
	defer obj.Close()
	f, err := pq.Open(obj, obj.Size())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptLog, err)
	}
	rows, err := f.RowsFor(checkpointReadSchema)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptLog, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := rows.Next(checkpointBatchRows)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptLog, err)
		}
		for _, r := range batch {
			a, err := checkpointRowAction(r)
			if err != nil {
				return err
			}
			if a == nil {
				continue // e.g. a commitInfo or cdc row, or all-null
			}
			if err := a.validate(); err != nil {
				return err
			}
			if err := fn(a); err != nil {
				return err
			}
		}
	}
}

// checkpointRowAction converts one checkpoint row into its action; nil if
// the row holds none of the projected actions.
func checkpointRowAction(r pq.Row) (*Action, error) {
	var a Action
	n := 0
	var err error
	if s, ok := r[0].([]any); ok {
		n++
		a.Txn = &Txn{AppID: str(s[0]), Version: i64(s[1]), LastUpdated: i64p(s[2])}
	}
	if s, ok := r[1].([]any); ok {
		n++
		add := &Add{Path: str(s[0]), Size: i64(s[2]), ModificationTime: i64(s[3]), DataChange: boolean(s[4]), Stats: str(s[5])}
		if add.PartitionValues, err = nullableStrMap(s[1]); err != nil {
			return nil, err
		}
		if add.PartitionValues == nil {
			add.PartitionValues = map[string]*string{}
		}
		if add.Tags, err = nullableStrMap(s[6]); err != nil {
			return nil, err
		}
		if dv, ok := s[7].([]any); ok {
			add.DeletionVector = &DeletionVector{StorageType: str(dv[0]), PathOrInlineDv: str(dv[1]), SizeInBytes: int32(i64(dv[2])), Cardinality: i64(dv[3])}
		}
		a.Add = add
	}
	if s, ok := r[2].([]any); ok {
		n++
		rm := &Remove{Path: str(s[0]), DeletionTimestamp: i64p(s[1]), DataChange: boolean(s[2]), Size: i64p(s[5])}
		if b, ok := s[3].(bool); ok {
			rm.ExtendedFileMetadata = &b
		}
		if rm.PartitionValues, err = nullableStrMap(s[4]); err != nil {
			return nil, err
		}
		a.Remove = rm
	}
	if s, ok := r[3].([]any); ok {
		n++
		md := &Metadata{ID: str(s[0]), SchemaString: str(s[4]), CreatedTime: i64p(s[7])}
		if v, ok := s[1].(string); ok {
			md.Name = &v
		}
		if v, ok := s[2].(string); ok {
			md.Description = &v
		}
		if f, ok := s[3].([]any); ok {
			md.Format.Provider = str(f[0])
			if md.Format.Options, err = strMapOf(f[1]); err != nil {
				return nil, err
			}
		}
		md.PartitionColumns = strSlice(s[5])
		if md.Configuration, err = strMapOf(s[6]); err != nil {
			return nil, err
		}
		a.MetaData = md
	}
	if s, ok := r[4].([]any); ok {
		n++
		a.Protocol = &Protocol{MinReaderVersion: int(i64(s[0])), MinWriterVersion: int(i64(s[1])),
			ReaderFeatures: strSlice(s[2]), WriterFeatures: strSlice(s[3])}
	}
	if _, ok := r[5].([]any); ok {
		n++
		a.Sidecar = []byte(`{}`)
	}
	if _, ok := r[6].([]any); ok {
		n++
		a.CheckpointMetadata = []byte(`{}`)
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: a checkpoint row holds %d actions, want one", ErrCorruptLog, n)
	}
	if n == 0 {
		return nil, nil
	}
	return &a, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func i64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	}
	return 0
}

func i64p(v any) *int64 {
	if v == nil {
		return nil
	}
	x := i64(v)
	return &x
}

func boolean(v any) bool {
	b, _ := v.(bool)
	return b
}

func strSlice(v any) []string {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, str(e))
	}
	return out
}

func nullableStrMap(v any) (map[string]*string, error) {
	if v == nil {
		return nil, nil
	}
	entries, ok := v.([]pq.MapEntry)
	if !ok {
		return nil, fmt.Errorf("%w: a checkpoint map column holds %T", ErrCorruptLog, v)
	}
	out := make(map[string]*string, len(entries))
	for _, e := range entries {
		k, ok := e.Key.(string)
		if !ok {
			return nil, fmt.Errorf("%w: a checkpoint map has a %T key", ErrCorruptLog, e.Key)
		}
		if e.Value == nil {
			out[k] = nil
			continue
		}
		s, ok := e.Value.(string)
		if !ok {
			return nil, fmt.Errorf("%w: a checkpoint map has a %T value", ErrCorruptLog, e.Value)
		}
		out[k] = &s
	}
	return out, nil
}

func strMapOf(v any) (map[string]string, error) {
	m, err := nullableStrMap(v)
	if err != nil || m == nil {
		return map[string]string{}, err
	}
	out := make(map[string]string, len(m))
	for k, p := range m {
		if p != nil {
			out[k] = *p
		}
	}
	return out, nil
}
