package lakewriter

// mergeBenchPaths are the paths BenchmarkMergeSteadyState measures.
var mergeBenchPaths = []string{"path=base"}

func mergeBenchDrainer(string) *Drainer { return &Drainer{} }
