package doctorcmd

import "github.com/omlhq/oml/internal/doctor"

// reconcileFunc runs the reconcile summary for --deep. It is nil until the
// reconcile engine (internal/reconcile) is wired in; the reconcile check
// then reports skipped and says why.
var reconcileFunc doctor.ReconcileFunc
