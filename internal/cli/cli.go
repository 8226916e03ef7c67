// Package cli holds what the packages that register command-line flags
// share, so that each declares its flags next to the code they configure
// and cmd/ wires them explicitly.
package cli

import "github.com/alecthomas/kingpin/v2"

// FlagGroup is what *kingpin.Application and *kingpin.CmdClause share, so
// that flags can go on the application or on one of its commands.
type FlagGroup interface {
	Flag(name, help string) *kingpin.FlagClause
}
