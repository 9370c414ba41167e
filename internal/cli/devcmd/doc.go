// Package devcmd implements `oml dev`: a private PostgreSQL for one working
// directory (`dev up`, `dev down`, `dev env`), built on internal/pgdev, and
// the home of the other developer commands (`dev load`); each verb lives in
// its own file and NewCmd adds them all explicitly.
//
// Everything lives under .oml/ in the working directory (or --dir):
//
//	.oml/pgdata/                 the cluster (owned by the server user)
//	.oml/pgdata/postgresql.log   its log
//	.oml/run/                    its unix socket (a short /tmp/oml-sock-* dir
//	                             instead when the path would exceed the
//	                             unix socket limit)
//	.oml/lake/                   the default file:// lake for the demo
//	.oml/dev.json                what `dev up` chose (database, port), read
//	                             by `dev env` and `dev down`
//
// `dev up` keeps durability on (fsync stays on): unlike the test harness's
// clusters, this one holds data someone may want after a crash.
package devcmd
