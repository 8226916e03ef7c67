package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// BuildModeEnv names the -buildmode BuildExporter uses, when set.
const BuildModeEnv = "KRB5_EXPORTER_BUILDMODE"

// BuildExporter builds krb5-exporter into out as `make package` builds the
// binary it ships (CGO_ENABLED=0, -trimpath): the tests run what users run,
// and every build without -race in `make test` (vet, these binaries, the
// packages, the zero-allocation pass) shares one compile of the module's
// dependencies instead of compiling them once per set of flags.
//
// With BuildModeEnv set (`make test-pie`: pie) it builds with that
// -buildmode, as distributions package Go programs (go-rpm-macros, hardened
// Debian builds): a daemon that worked only in the default mode crashed at
// start as a PIE (issue #36).
func BuildExporter(ctx context.Context, out string) error {
	return buildExporter(ctx, out, os.Getenv(BuildModeEnv))
}

// BuildPackagedExporter builds the binary `make package` ships: as
// BuildExporter, and always a PIE.
func BuildPackagedExporter(ctx context.Context, out string) error {
	return buildExporter(ctx, out, "pie")
}

func buildExporter(ctx context.Context, out, mode string) error {
	dir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/krb5-exporter/krb5-exporter").Output()
	if err != nil {
		return fmt.Errorf("go list -m: %w", err)
	}
	args := []string{"build", "-trimpath"}
	if mode != "" {
		args = append(args, "-buildmode="+mode)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, "./cmd/krb5-exporter")...)
	cmd.Dir = strings.TrimSpace(string(dir))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	return nil
}
