package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcCPU is the user plus system CPU time of process pid so far, from
// /proc/<pid>/stat (USER_HZ 100: 10 ms resolution; measure over many
// operations).
func ProcCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// utime and stime are the 12th and 13th fields after comm's ")".
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// SelfCPU is this process's user plus system CPU time so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Schedstat returns a process's /proc/PID/schedstat: its time on a CPU
// (nanoseconds, unlike ProcCPU's clock ticks) and how many times the
// kernel put it on one (each wake-up from an idle wait is one).
func Schedstat(pid int) (cpu time.Duration, slices int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return 0, 0, fmt.Errorf("/proc/%d/schedstat: %q", pid, data)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err == nil {
		slices, err = strconv.ParseInt(f[2], 10, 64)
	}
	return time.Duration(ns), slices, err
}
