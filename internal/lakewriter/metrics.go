package lakewriter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/replication"
)

// Metrics are the lake writer's Prometheus metrics. A nil *Metrics is valid
// and records nothing.
type Metrics struct {
	Batches         prometheus.Counter
	Rows            *prometheus.CounterVec // by table kind
	Bytes           prometheus.Counter
	CommitLatency   prometheus.Histogram
	FrontierLagSeq  prometheus.Gauge
	FrontierLagSecs prometheus.Gauge
	DeadLetters     prometheus.Counter
	Retries         *prometheus.CounterVec // by reason: outage, poison, config
	Checkpoints     prometheus.Counter
	Frontier        prometheus.Gauge
	HorizonBlocked  prometheus.Gauge
	// LeaseHeld is 1 while this process holds the lake writer lease (a
	// second writer waiting for it shows 0): max() over the writers is 0 or
	// absent when nothing drains.
	LeaseHeld prometheus.Gauge
	// LastBatch is when this writer last applied a batch (Unix seconds).
	LastBatch prometheus.Gauge
	// HeldTenants counts tenants not materialized because their chain
	// disagrees with its witnessed head (fork or lost tail).
	HeldTenants prometheus.Gauge
	// LastWitness is when this writer last published a signed head.
	LastWitness prometheus.Gauge
	// ContinuityRefused is 1 while the writer refuses to write because the
	// lake is ahead of or diverged from the database.
	ContinuityRefused prometheus.Gauge
	// DurabilityBlocked is 1 while the required standbys have not flushed
	// the stable prefix; StandbyBehind is each streaming standby's flush
	// position behind the position waited for, in bytes, by standby name.
	DurabilityBlocked prometheus.Gauge
	StandbyBehind     *prometheus.GaugeVec
	// TenantHeld is 1 per held tenant, labelled by tenant id and reason
	// (fork, tail-lost, ...): a series exists only while a tenant is held,
	// so its cardinality is the number of held tenants (normally none).
	TenantHeld *prometheus.GaugeVec
	// TablesHeld counts tables held for a fault of their own (faults.go).
	TablesHeld prometheus.Gauge
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "oml_lakewriter_batches_total", Help: "Batches applied to the lake."}),
		Rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "oml_lakewriter_rows_total", Help: "Rows written to Delta tables, by table kind."},
			[]string{"table"}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "oml_lakewriter_bytes_total", Help: "Parquet bytes written."}),
		CommitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "oml_lakewriter_commit_seconds",
			Help: "Delta commit latency (put-if-absent of the log entry).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		FrontierLagSeq:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_frontier_lag_seq", Help: "Outbox seqs drawn but not yet in the lake."}),
		FrontierLagSecs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_frontier_lag_seconds", Help: "Age of the oldest outbox row not yet in the lake."}),
		DeadLetters:     prometheus.NewCounter(prometheus.CounterOpts{Name: "oml_lakewriter_dead_letters_total", Help: "Outbox rows dead-lettered."}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "oml_lakewriter_retries_total", Help: "Batch retries, by reason."},
			[]string{"reason"}),
		Checkpoints:    prometheus.NewCounter(prometheus.CounterOpts{Name: "oml_lakewriter_checkpoints_total", Help: "Delta checkpoints written."}),
		Frontier:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_frontier", Help: "Last outbox seq applied to the lake."}),
		HorizonBlocked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_horizon_blocked", Help: "1 while a transaction holds the snapshot horizon behind the writer's fence."}),
		LeaseHeld:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_lease_held", Help: "1 while this process holds the lake writer lease."}),
		LastBatch:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_last_batch_timestamp_seconds", Help: "When this writer last applied a batch (Unix seconds)."}),
		HeldTenants:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_held_tenants", Help: "Tenants not materialized because their chain disagrees with its witnessed head."}),
		LastWitness:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_last_witness_timestamp_seconds", Help: "When this writer last published a signed chain head (Unix seconds)."}),
		ContinuityRefused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_continuity_refused",
			Help: "1 while the writer refuses to write because the lake is ahead of or diverged from the database (docs/runbooks/continuity.md)."}),
		DurabilityBlocked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_durability_blocked",
			Help: "1 while the standbys required by --durable-on have not flushed the stable prefix (lag, not loss)."}),
		StandbyBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "oml_lakewriter_standby_behind_bytes",
			Help: "Bytes of WAL a streaming standby has not flushed, below the position the lake writer waits for."}, []string{"standby"}),
		TenantHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "oml_lakewriter_tenant_held",
			Help: "1 for each tenant held because its chain disagrees with its witnessed head or bronze copy (only held tenants have a series)."}, []string{"tenant", "reason"}),
		TablesHeld: prometheus.NewGauge(prometheus.GaugeOpts{Name: "oml_lakewriter_tables_held", Help: "Delta tables held for a fault of their own (a corrupt commit, an unreadable data file); see oml lake status."}),
	}
	reg.MustRegister(m.Batches, m.Rows, m.Bytes, m.CommitLatency, m.FrontierLagSeq, m.FrontierLagSecs,
		m.DeadLetters, m.Retries, m.Checkpoints, m.Frontier, m.HorizonBlocked,
		m.LeaseHeld, m.LastBatch, m.HeldTenants, m.LastWitness, m.ContinuityRefused, m.DurabilityBlocked, m.StandbyBehind, m.TablesHeld, m.TenantHeld)
	return m
}

func (m *Metrics) tableCommitted(r tableResult) {
	if m == nil {
		return
	}
	m.Rows.WithLabelValues(string(r.key.Kind)).Add(float64(r.rows))
	m.Bytes.Add(float64(r.bytes))
	m.CommitLatency.Observe(r.latency.Seconds())
}

func (m *Metrics) batchDone(r BatchResult) {
	if m == nil {
		return
	}
	m.Batches.Inc()
	m.Frontier.Set(float64(r.End))
	m.LastBatch.SetToCurrentTime()
}

func (m *Metrics) leaseHeld(held bool) {
	if m == nil {
		return
	}
	if held {
		m.LeaseHeld.Set(1)
	} else {
		m.LeaseHeld.Set(0)
	}
}

func (m *Metrics) heldTenants(held []chainverify.Finding) {
	if m == nil {
		return
	}
	m.HeldTenants.Set(float64(len(held)))
	m.TenantHeld.Reset()
	for _, f := range held {
		m.TenantHeld.WithLabelValues(f.Tenant.String(), string(f.Reason)).Set(1)
	}
}

func (m *Metrics) witnessed() {
	if m != nil {
		m.LastWitness.SetToCurrentTime()
	}
}

func (m *Metrics) retry(reason string) {
	if m == nil {
		return
	}
	m.Retries.WithLabelValues(reason).Inc()
}

func (m *Metrics) deadLettered() {
	if m != nil {
		m.DeadLetters.Inc()
	}
}

func (m *Metrics) checkpoint() {
	if m != nil {
		m.Checkpoints.Inc()
	}
}

func (m *Metrics) lag(seqs int64, secs float64, blocked bool) {
	if m == nil {
		return
	}
	m.FrontierLagSeq.Set(float64(seqs))
	m.FrontierLagSecs.Set(secs)
	if blocked {
		m.HorizonBlocked.Set(1)
	} else {
		m.HorizonBlocked.Set(0)
	}
}

func (m *Metrics) continuity(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.ContinuityRefused.Set(0)
	} else {
		m.ContinuityRefused.Set(1)
	}
}

func (m *Metrics) durability(v replication.Verdict) {
	if m == nil {
		return
	}
	if v.Durable {
		m.DurabilityBlocked.Set(0)
	} else {
		m.DurabilityBlocked.Set(1)
	}
	m.StandbyBehind.Reset()
	for _, ps := range [][]replication.Position{v.Flushed, v.Waiting} {
		for _, p := range ps {
			m.StandbyBehind.WithLabelValues(p.Standby).Set(float64(p.BehindBytes))
		}
	}
}

func (m *Metrics) tablesHeld(n int) {
	if m != nil {
		m.TablesHeld.Set(float64(n))
	}
}
