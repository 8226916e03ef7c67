package vmtest

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The parts of make test-vm that read the repository run in make test
// too, so that a README or drop-in they can no longer read fails at once.

// TestREADMEInstallBlock: the block holds a make line (run here), the
// package's install and the service's restart (run in the guest).
func TestREADMEInstallBlock(t *testing.T) {
	lines := readmeInstall(t, "..")
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"make package", "dpkg -i dist/krb5-exporter_*.deb", "systemctl restart krb5-exporter", "curl -s localhost:10088/metrics"} {
		if !strings.Contains(joined, want) {
			t.Errorf("README's install block has no %q:\n%s", want, joined)
		}
	}
	if !strings.HasPrefix(lines[len(lines)-1], "curl ") {
		t.Errorf("the block's last line is not the check make test-vm retries: %q", lines[len(lines)-1])
	}
}

// TestUncommentDropIn: the shipped kdcservice.conf uncommented as its
// comments say grants CAP_BPF and CAP_PERFMON and allows bpf(2) and perf_event_open(2), and
// leaves the block for kernels before 5.11 commented unless asked for it.
func TestUncommentDropIn(t *testing.T) {
	b, err := os.ReadFile("../packaging/files/kdcservice.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[Service]", "CapabilityBoundingSet=CAP_BPF CAP_PERFMON", "AmbientCapabilities=CAP_BPF CAP_PERFMON", "SystemCallFilter=bpf perf_event_open"}
	memlock := []string{"CapabilityBoundingSet=CAP_SYS_RESOURCE", "AmbientCapabilities=CAP_SYS_RESOURCE", "SystemCallFilter=setrlimit prlimit64"}
	for _, before511 := range []bool{false, true} {
		d := uncommentDropIn(t, string(b), before511)
		var active []string
		for _, l := range strings.Split(d, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				active = append(active, l)
			}
		}
		w := want
		if before511 {
			w = append(w[:len(w):len(w)], memlock...)
		}
		if strings.Join(active, "\n") != strings.Join(w, "\n") {
			t.Errorf("uncommented drop-in (before 5.11: %v):\n%s\nwant:\n%s", before511, strings.Join(active, "\n"), strings.Join(w, "\n"))
		}
	}
}

// TestMergeProbe: the snippet's module and probe are added, its
// probe_principals go to the configuration's log of the same type, the
// other log stays.
func TestMergeProbe(t *testing.T) {
	cfg := "logs:\n  - {path: /var/log/krb5kdc.log, type: kdc}\n  - {path: /var/log/kadmind.log, type: kadmind}\n"
	snippet := `modules:
  default: {realm: R, client: p@R, keytab: /k}
probes:
  - {name: local-kdc, address: "127.0.0.1:88", module: default}
logs:
  - {path: /elsewhere.log, type: kdc, probe_principals: [p@R]}
`
	out, err := mergeProbe([]byte(cfg), []byte(snippet))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Modules map[string]map[string]string
		Probes  []map[string]string
		Logs    []struct {
			Path            string
			Type            string
			ProbePrincipals []string `yaml:"probe_principals"`
		}
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Modules["default"]["client"] != "p@R" || len(got.Probes) != 1 || len(got.Logs) != 2 ||
		got.Logs[0].Path != "/var/log/krb5kdc.log" || strings.Join(got.Logs[0].ProbePrincipals, ",") != "p@R" ||
		got.Logs[1].Type != "kadmind" || got.Logs[1].ProbePrincipals != nil {
		t.Errorf("merged:\n%s", out)
	}
}
