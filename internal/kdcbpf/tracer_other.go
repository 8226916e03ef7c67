//go:build !(linux && amd64)

package kdcbpf

import "errors"

// Tracer is the program on linux/amd64; elsewhere it cannot be loaded.
type Tracer struct {
	Hooks   string
	Skipped []string
}

// Load fails: the program is built for linux/amd64 only (its hooks are
// the x86-64 syscall wrappers).
func Load() (*Tracer, error) {
	return nil, &Error{Reason: ReasonUnsupportedKernel, Err: errors.New("the service-time program is built for linux/amd64 only")}
}

func (t *Tracer) Close() error           { return nil }
func (t *Tracer) Watch(pids []int) error { return nil }
func (t *Tracer) Read(s *Snapshot) error { return nil }
func (t *Tracer) Attach() error          { return nil }
func (t *Tracer) Detach()                {}

// KernelMayLack: here every mode is missing.
func KernelMayLack(mode string) bool { return true }
