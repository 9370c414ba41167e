package outbox_test

import "flag"

func flagInt(name string, def int, usage string) *int { return flag.Int(name, def, usage) }
