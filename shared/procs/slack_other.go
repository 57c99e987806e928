//go:build !linux

package procs

import "time"

// ApplySlack does nothing: timer slack is a Linux feature.
func ApplySlack(time.Duration) error { return nil }

// Slack is 0: timer slack is a Linux feature.
func Slack() time.Duration { return 0 }

// StartChild runs start.
func StartChild(start func() error) error { return start() }
