package delta

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnsupported is wrapped by every refusal of the strict gate: the table
// uses a protocol version, a table feature or a setting oml does not
// implement. Test with errors.Is; errors.As an *UnsupportedError for details.
var ErrUnsupported = errors.New("unsupported Delta table feature")

// UnsupportedError is a refusal by the strict gate.
type UnsupportedError struct {
	Table   string // the table, as the store describes it
	Op      string // "read" or "write to"
	Feature string // the feature or setting, e.g. "deletionVectors", "readerVersion 99", "delta.setTransactionRetentionDuration"
	Detail  string // why the gate saw it, e.g. "protocol 3/7, readerFeatures [deletionVectors]"
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("cannot %s Delta table %s: it uses %q (%s), which oml does not implement; use a full Delta engine for this table",
		e.Op, e.Table, e.Feature, e.Detail)
}

func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// Writer features oml can honor: appendOnly (enforced on every commit) and
// invariants (allowed only while no column declares one). Everything else
// at writer version 7 is refused.
var writableWriterFeatures = map[string]bool{"appendOnly": true, "invariants": true}

// implied features of legacy writer versions (P§Writer Version Requirements).
var legacyWriterFeature = map[int]string{
	3: "checkConstraints",
	4: "changeDataFeed",
	5: "columnMapping",
	6: "identityColumns",
}

func protoString(p Protocol) string {
	s := fmt.Sprintf("protocol %d/%d", p.MinReaderVersion, p.MinWriterVersion)
	if len(p.ReaderFeatures) > 0 {
		s += fmt.Sprintf(", readerFeatures [%s]", strings.Join(p.ReaderFeatures, ", "))
	}
	if len(p.WriterFeatures) > 0 {
		s += fmt.Sprintf(", writerFeatures [%s]", strings.Join(p.WriterFeatures, ", "))
	}
	return s
}

// checkRead is the reader gate. oml reads only reader version 1: every
// reader feature (column mapping, deletion vectors, v2 checkpoints,
// timestamp_ntz, ...) changes how files or rows must be interpreted, and
// guessing returns wrong data.
func checkRead(table string, p Protocol, md *Metadata, schema *StructType) error {
	refuse := func(feature, detail string) error {
		return &UnsupportedError{Table: table, Op: "read", Feature: feature, Detail: detail}
	}
	switch {
	case p.MinReaderVersion == 2:
		return refuse("columnMapping", protoString(p)+": reader version 2 means column mapping")
	case p.MinReaderVersion == 3 && len(p.ReaderFeatures) > 0:
		fs := append([]string(nil), p.ReaderFeatures...)
		sort.Strings(fs)
		return refuse(strings.Join(fs, ", "), protoString(p))
	case p.MinReaderVersion > 1:
		return refuse(fmt.Sprintf("readerVersion %d", p.MinReaderVersion), protoString(p)+": oml reads reader version 1 only")
	}
	if md == nil {
		return nil
	}
	if v, ok := md.Configuration["delta.setTransactionRetentionDuration"]; ok {
		return refuse("delta.setTransactionRetentionDuration",
			fmt.Sprintf("set to %q: engines would expire txn identifiers and exactly-once would be lost", v))
	}
	if v, ok := md.Configuration["delta.columnMapping.mode"]; ok && v != "none" {
		return refuse("columnMapping", fmt.Sprintf("delta.columnMapping.mode is %q", v))
	}
	if md.Format.Provider != "" && md.Format.Provider != "parquet" {
		return refuse("format "+md.Format.Provider, "metaData.format.provider is not parquet")
	}
	if schema != nil {
		var err error
		walkTypes(schema, func(path string, t DataType, _ *StructField) {
			if err != nil {
				return
			}
			if pt, ok := t.(*PrimitiveType); ok {
				switch pt.Name {
				case TypeTimestampNTZ:
					err = refuse("timestampNtz", fmt.Sprintf("column %q has type timestamp_ntz", path))
				case TypeVariant:
					err = refuse("variantType", fmt.Sprintf("column %q has type variant", path))
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkWrite is the writer gate: everything the reader gate refuses, plus
// writer versions above 2 (or 7 with features outside the allow-list), and
// writer-v2 obligations oml does not implement (column invariants).
func checkWrite(table string, p Protocol, md *Metadata, schema *StructType) error {
	if err := checkRead(table, p, md, schema); err != nil {
		var ue *UnsupportedError
		if errors.As(err, &ue) {
			ue.Op = "write to"
		}
		return err
	}
	refuse := func(feature, detail string) error {
		return &UnsupportedError{Table: table, Op: "write to", Feature: feature, Detail: detail}
	}
	switch w := p.MinWriterVersion; {
	case w <= 2:
	case w == 7:
		var bad []string
		for _, f := range p.WriterFeatures {
			if !writableWriterFeatures[f] {
				bad = append(bad, f)
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return refuse(strings.Join(bad, ", "), protoString(p))
		}
	case legacyWriterFeature[w] != "":
		return refuse(legacyWriterFeature[w], fmt.Sprintf("%s: writer version %d implies it", protoString(p), w))
	default:
		return refuse(fmt.Sprintf("writerVersion %d", w), protoString(p))
	}
	if md != nil {
		for k := range md.Configuration {
			if strings.HasPrefix(k, "delta.constraints.") {
				return refuse("checkConstraints", fmt.Sprintf("configuration sets %s", k))
			}
		}
		if md.Configuration["delta.enableChangeDataFeed"] == "true" {
			return refuse("changeDataFeed", "delta.enableChangeDataFeed is true")
		}
		if md.Configuration["delta.enableDeletionVectors"] == "true" {
			return refuse("deletionVectors", "delta.enableDeletionVectors is true")
		}
		if md.Configuration["delta.enableRowTracking"] == "true" {
			return refuse("rowTracking", "delta.enableRowTracking is true")
		}
	}
	if schema != nil {
		var err error
		walkTypes(schema, func(path string, _ DataType, f *StructField) {
			if err != nil || f == nil {
				return
			}
			for key, feature := range map[string]string{
				"delta.invariants":           "invariants",
				"delta.generationExpression": "generatedColumns",
				"delta.identity.start":       "identityColumns",
				"CURRENT_DEFAULT":            "allowColumnDefaults",
			} {
				if _, ok := f.Metadata[key]; ok {
					err = refuse(feature, fmt.Sprintf("column %q declares %s", path, key))
					return
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// appendOnly reports whether the table forbids removing data.
func appendOnly(md *Metadata) bool {
	return md != nil && strings.EqualFold(md.Configuration["delta.appendOnly"], "true")
}
