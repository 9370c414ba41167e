package store_test

const raceChildEnv = "OML_STORE_RACE_CHILD"

func raceChild() int { return 0 }
