// Package monitoring holds the checks of what oml ships for monitoring in
// docs/monitoring/: the Prometheus alerting and recording rules, their
// promtool unit tests and the Grafana dashboard. It has no code the binary
// uses; its tests keep the shipped files true:
//
//   - promtool accepts the rules (`promtool check rules`) and their unit
//     tests pass (`promtool test rules`); every alert has a test in which it
//     fires and one in which it stays quiet;
//   - every metric a rule or a dashboard panel names is one oml exports: the
//     lake writer's families (lakewriter.NewMetrics), doctor's families
//     (doctor.Gatherer), and every (check, key) pair of doctor's values that
//     a selector names is produced by a real doctor run on a real
//     deployment — so renaming a metric, a check or a data key fails CI
//     instead of silently blinding an alert;
//   - every runbook an alert links to exists.
//
// promtool comes from Debian's prometheus package (scripts/ensure-promtool.sh,
// run by make deps).
package monitoring
