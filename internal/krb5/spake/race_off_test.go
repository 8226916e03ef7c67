//go:build !race

package spake

const raceEnabled = false
