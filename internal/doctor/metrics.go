package doctor

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Prometheus export of a report, for monitoring without parsing JSON: `oml
// doctor --metrics-file` writes it in the text format node_exporter's
// textfile collector reads. The families and their labels are fixed (check
// ids and Data keys are stable, documented in docs/doctor.md), so the label
// cardinality is bounded by the number of checks and their keys, never by
// tenants or rows.
//
//	oml_doctor_check_status{check}          0 ok, 1 warn, 2 fail, -1 skipped
//	oml_doctor_check_value{check,key}       every numeric Data value; a bool
//	                                        is 0/1, a time is Unix seconds, a
//	                                        list is its length, a map of
//	                                        numbers is one key per entry
//	                                        ("counts.missing-in-lake")
//	oml_doctor_checks{status}               checks per status
//	oml_doctor_last_run_timestamp_seconds   when the run started
//	oml_doctor_run_duration_seconds         how long it took

// Metric family names (docs/monitoring/ and its rule tests use them).
const (
	MetricCheckStatus  = "oml_doctor_check_status"
	MetricCheckValue   = "oml_doctor_check_value"
	MetricChecks       = "oml_doctor_checks"
	MetricLastRun      = "oml_doctor_last_run_timestamp_seconds"
	MetricRunDuration  = "oml_doctor_run_duration_seconds"
	statusValueSkipped = -1
)

// StatusValue is the number a status is exported as.
func StatusValue(s Status) float64 {
	switch s {
	case StatusOK:
		return 0
	case StatusWarn:
		return 1
	case StatusFail:
		return 2
	}
	return statusValueSkipped
}

// Gatherer returns the report as a Prometheus gatherer (a fresh registry
// holding only the report's values).
func Gatherer(rep *Report) (prometheus.Gatherer, error) {
	reg := prometheus.NewRegistry()
	status := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricCheckStatus,
		Help: "Each doctor check's status: 0 ok, 1 warn, 2 fail, -1 skipped."}, []string{"check"})
	value := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricCheckValue,
		Help: "Each doctor check's measured values (its JSON data), by key; bools 0/1, times Unix seconds, lists their length."},
		[]string{"check", "key"})
	counts := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricChecks,
		Help: "Doctor checks per status in the last run."}, []string{"status"})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLastRun, Help: "When the last doctor run started (Unix seconds)."})
	dur := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricRunDuration, Help: "How long the last doctor run took."})
	for _, c := range []prometheus.Collector{status, value, counts, last, dur} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("doctor metrics: %w", err)
		}
	}
	for _, c := range rep.Checks {
		status.WithLabelValues(c.ID).Set(StatusValue(c.Status))
		keys := make([]string, 0, len(c.Data))
		for k := range c.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for key, v := range numericValues(k, c.Data[k]) {
				value.WithLabelValues(c.ID, key).Set(v)
			}
		}
	}
	for _, s := range []Status{StatusOK, StatusWarn, StatusFail, StatusSkipped} {
		counts.WithLabelValues(string(s)).Set(float64(rep.Counts[s]))
	}
	last.Set(float64(rep.StartedAt.UnixNano()) / 1e9)
	dur.Set(rep.DurationSeconds)
	return reg, nil
}

// WriteMetricsFile writes the report to path in the Prometheus text format,
// atomically (a temporary file renamed over it), so a collector never reads
// half a file.
func WriteMetricsFile(path string, rep *Report) error {
	g, err := Gatherer(rep)
	if err != nil {
		return err
	}
	if err := prometheus.WriteToTextfile(path, g); err != nil {
		return fmt.Errorf("write the doctor metrics to %s: %w", path, err)
	}
	return nil
}

// numericValues turns one Data value into the numbers it exports, keyed by
// label value; strings and nested lists of maps are counted or skipped.
func numericValues(key string, v any) map[string]float64 {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		if x {
			return map[string]float64{key: 1}
		}
		return map[string]float64{key: 0}
	case time.Time:
		if x.IsZero() {
			return nil
		}
		return map[string]float64{key: float64(x.UnixNano()) / 1e9}
	case *time.Time:
		if x == nil || x.IsZero() {
			return nil
		}
		return map[string]float64{key: float64(x.UnixNano()) / 1e9}
	case time.Duration:
		return map[string]float64{key: x.Seconds()}
	case string:
		return nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]float64{key: float64(rv.Int())}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]float64{key: float64(rv.Uint())}
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return map[string]float64{key: f}
	case reflect.Slice, reflect.Array:
		return map[string]float64{key: float64(rv.Len())}
	case reflect.Map:
		out := map[string]float64{}
		it := rv.MapRange()
		for it.Next() {
			if it.Key().Kind() != reflect.String {
				return nil
			}
			for k, f := range numericValues(key+"."+it.Key().String(), it.Value().Interface()) {
				out[k] = f
			}
		}
		return out
	case reflect.Pointer:
		if rv.IsNil() {
			return nil
		}
		return numericValues(key, rv.Elem().Interface())
	}
	return nil
}
