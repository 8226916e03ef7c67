//go:build !linux

package testutil

import "testing"

// Tracefs: only Linux has tracefs.
func Tracefs(t testing.TB) {}
