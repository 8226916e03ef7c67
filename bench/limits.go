package bench

import "fmt"

// The causes a load's figures can show for the KDC not being the limit
// of its rate (limitsOf).
const (
	causeDisk      = "disk"      // the KDC waited for its database writes
	causeCPU       = "cpu"       // it waited for a CPU other processes had
	causeGenerator = "generator" // the generator took its CPU, or could not keep up
	causeNetwork   = "network"   // neither was busy: the round trips held the rate
	causeSteal     = "steal"     // the hypervisor gave the KDC's virtual CPUs to another guest
)

// limit is one cause and the warning that says it.
type limit struct {
	cause, text string
}

// limitsOf says what held a load's rate down, from its figures alone,
// at most one warning per cause. busyPct is the warn level (Targets.
// KDCBusyWarnPct): a wait of the KDC counts from 100-busyPct % of its
// cores. full is for the loads meant to keep the KDC busy (as, tgs); the
// others (a steady light load, the concurrency levels, tcp) are judged
// on the waits for a CPU only, where a KDC idle between requests is
// what the load is.
//
// Steal of the KDC's CPUs (the hypervisor's) is a cause of its own and
// explains idle time as the waits do.
//
// The generator is blamed from evidence, not from its CPU per request:
// the KDC waited for a CPU it shares with the generator, and the
// generator ran at least half as long as the KDC waited, the main one of
// the processes the KDC can have waited for (else other processes were,
// and the wait is the CPU's); or, in a full load, the KDC was idle more
// than the warn level allows beyond what its waits named here explain,
// while the generator was busy a whole core (else the round trips, the
// network and the requests in flight, were the limit).
func limitsOf(test string, u CPUUse, full bool, busyPct float64) []limit {
	if u.KDCCores == 0 || busyPct <= 0 {
		return nil
	}
	wait := 100 - busyPct
	var out []limit
	cpuWait, diskWait := u.KDCCPUWaitPct >= wait, full && u.KDCDiskWaitPct >= wait
	if cpuWait {
		if u.SharedCPUs > 0 && 2*u.GenBusyPct >= u.KDCCPUWaitPct*float64(u.KDCCores) {
			out = append(out, limit{causeGenerator, fmt.Sprintf("%s: the KDC waited, runnable, for a CPU %.0f %% of the time (busy %.0f %% of the %d core(s) it may use, CPU %.0f %%) on %d CPU(s) the generator runs on too, which used %.0f %% of a core (%.0f µs per request, %.2fx the KDC's %.0f µs): the generator took the KDC's CPU; pin them apart (--kdc-cpu, --generator-cpu)",
				test, u.KDCCPUWaitPct, u.KDCBusyTotalPct, u.KDCCores, u.KDCCoresBusyPct, u.SharedCPUs, u.GenBusyPct, u.GeneratorPerRequestUS, u.Ratio, u.KDCPerRequestUS)})
		} else {
			gen := fmt.Sprintf("the generator, pinned apart, used %.0f %% of a core", u.GenBusyPct)
			if u.SharedCPUs > 0 {
				gen = fmt.Sprintf("the generator used %.0f %% of a core, on %d of them too", u.GenBusyPct, u.SharedCPUs)
			}
			out = append(out, limit{causeCPU, fmt.Sprintf("%s: the KDC waited, runnable, for a CPU %.0f %% of the time (busy %.0f %% of the %d core(s) it may use, CPU %.0f %%; %s): other processes on its CPUs held the rate down",
				test, u.KDCCPUWaitPct, u.KDCBusyTotalPct, u.KDCCores, u.KDCCoresBusyPct, gen)})
		}
	}
	// Steal: the KDC's CPU time and its waits both leave it out, so that
	// it looks idle; a rate measured so says little of the KDC.
	steal := u.KDCStealPct >= wait
	if steal {
		out = append(out, limit{causeSteal, fmt.Sprintf("%s: the hypervisor gave the CPU(s) the KDC may use to another guest %.0f %% of the time (steal time; the KDC busy %.0f %% of the %d core(s) it may use, CPU %.0f %%): this VM's host held the rate down, and the rates of this run understate the KDC; run where the vCPUs are not overcommitted",
			test, u.KDCStealPct, u.KDCBusyTotalPct, u.KDCCores, u.KDCCoresBusyPct)})
	}
	if diskWait {
		out = append(out, limit{causeDisk, fmt.Sprintf("%s: the KDC waited for its database writes %.0f %% of the time (busy %.0f %% of the %d core(s) it may use, CPU %.0f %%): disable_last_success / disable_lockout / the database's disk decide the rate",
			test, u.KDCDiskWaitPct, u.KDCBusyTotalPct, u.KDCCores, u.KDCCoresBusyPct)})
	}
	// The idle share the waits named above do not explain (a wait can
	// account for as much idle time as it lasted, no more).
	idle := u.KDCIdlePct
	if cpuWait {
		idle -= u.KDCCPUWaitPct
	}
	if diskWait {
		idle -= u.KDCDiskWaitPct
	}
	if steal {
		idle -= u.KDCStealPct
	}
	if !full || u.KDCBusyTotalPct >= busyPct || idle < wait {
		return out
	}
	if u.GenBusyPct >= busyPct {
		return append(out, limit{causeGenerator, fmt.Sprintf("%s: the KDC was %.0f %% busy on the %d core(s) it may use (CPU %.0f %%, waiting for a CPU %.0f %%, for its own disk writes %.0f %%; idle %.0f %%; warning below %.0f %%) while the generator used %.0f %% of a core (%.0f µs per request): the generator was the limit of the rate",
			test, u.KDCBusyTotalPct, u.KDCCores, u.KDCCoresBusyPct, u.KDCCPUWaitPct, u.KDCDiskWaitPct, u.KDCIdlePct, busyPct, u.GenBusyPct, u.GeneratorPerRequestUS)})
	}
	return append(out, limit{causeNetwork, fmt.Sprintf("%s: the KDC was %.0f %% busy on the %d core(s) it may use (CPU %.0f %%, waiting for a CPU %.0f %%, for its own disk writes %.0f %%; idle %.0f %%; warning below %.0f %%) and the generator %.0f %% of a core: the round trips (the network, the requests in flight) were the limit of the rate",
		test, u.KDCBusyTotalPct, u.KDCCores, u.KDCCoresBusyPct, u.KDCCPUWaitPct, u.KDCDiskWaitPct, u.KDCIdlePct, busyPct, u.GenBusyPct)})
}

// checkLimits warns with limitsOf's findings (none when the KDC's
// processes are not on this machine).
func (r *run) checkLimits(test string, u CPUUse, full bool) {
	if r.sys.KDCPids == nil {
		return
	}
	for _, l := range limitsOf(test, u, full, r.set.Targets.KDCBusyWarnPct) {
		r.warnKind("limit "+l.cause, l.text)
		if l.cause != causeDisk { // the KDC's own writes are its limit
			r.environmentLimited(test)
		}
	}
}
