//go:build race

package testutil

// Race says whether the race detector is built in: tests whose numbers it
// changes (allocations, CPU, how much input fits in time) ask here.
const Race = true
