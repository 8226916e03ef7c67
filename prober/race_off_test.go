//go:build !race

package prober

const raceEnabled = false
