//go:build race

package spake

const raceEnabled = true
