package recovery

// WithCrashAt returns opts whose restore transactions call crash at each
// named point ("after-journal", "after-fold"); an error aborts there.
func WithCrashAt(opts RestoreOptions, crash func(point string) error) RestoreOptions {
	opts.hook = crash
	return opts
}
