//go:build race

package krb5

const raceEnabled = true
