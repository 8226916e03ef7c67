package capacity

import "golang.org/x/sys/unix"

// AffinityCPUs returns a Config.CPUs: how many CPUs the processes pids
// returns may run on together (their affinity masks: taskset, cgroup
// cpusets), 0 when none could be read (another pid namespace's /proc).
func AffinityCPUs(pids func() []int) func() int {
	return func() int {
		var all unix.CPUSet
		for _, p := range pids() {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(p, &set); err != nil {
				continue
			}
			for i := range all {
				all[i] |= set[i]
			}
		}
		return all.Count()
	}
}
