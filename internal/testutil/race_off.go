//go:build !race

package testutil

// Race says whether the race detector is built in.
const Race = false
