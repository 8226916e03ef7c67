package capacity

// Totals are a KDC's counts at one moment, as one scrape gives them to
// the daemon: what another measurer (the bench, around its latency load)
// passes to Estimate to apply the daemon's model to its own window.
type Totals struct {
	// Workers is how many processes serve requests: 1 for a KDC
	// without -w.
	Workers int
	// CPU is the seconds on CPU of all krb5kdc processes; Disk their
	// seconds waiting for their disk, when HaveDisk.
	CPU, Disk float64
	HaveDisk  bool
	// AS and TGS are the requests answered.
	AS, TGS float64
	// Service is the kdcservice collector's account; nil without it.
	Service *ServiceTotals
}

// ServiceTotals are the kdcservice collector's counts (its seconds), by
// request type as, tgs, other.
type ServiceTotals struct {
	Requests, CPU, Blocked [3]float64
	// Outside is the workers' CPU outside service.
	Outside float64
}

// Estimated is the model applied to one window.
type Estimated struct {
	Source  string // SourceKDCService when both ends have Service, else SourceProc
	Workers int
	Rows    []StatusRow // as, tgs, mix; no Rate or Bench
}

// Estimate applies the daemon's model to the window from start to end:
// a type needs minRequests requests in it (DefaultMinRequests when 0);
// cpus is how many CPUs the KDC's processes may use (0: unknown).
func Estimate(start, end Totals, cpus, minRequests int) Estimated {
	if minRequests <= 0 {
		minRequests = DefaultMinRequests
	}
	res := estimate([]sample{start.sample(), end.sample()}, Config{MinRequests: minRequests})
	return Estimated{Source: res.source, Workers: res.workers, Rows: res.rows(cpus, 0, nil)}
}

func (t Totals) sample() sample {
	s := sample{workers: max(t.Workers, 1), cpu: t.CPU, disk: t.Disk, haveCPU: true, haveDisk: t.HaveDisk, reqs: [2]float64{t.AS, t.TGS}}
	if v := t.Service; v != nil {
		s.traced = true
		s.svcN, s.svcCPU, s.svcB, s.outside = v.Requests, v.CPU, v.Blocked, v.Outside
	}
	return s
}
