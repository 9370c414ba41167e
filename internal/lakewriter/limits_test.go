package lakewriter_test

import "github.com/omlhq/oml/internal/outbox"

func lakewriterLimits(rows int) outbox.Limits { return outbox.Limits{Rows: rows} }
