//go:build race

package kdclog

const raceEnabled = true
