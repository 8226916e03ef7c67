package bench

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("klist", "-V").Output(); err == nil {
		m.KRB5Version = strings.TrimSpace(string(bytes.TrimPrefix(out, []byte("Kerberos 5 version "))))
	}
	return m
}
