package pgdev_test

import "time"

func sleepBriefly() { time.Sleep(10 * time.Millisecond) }
