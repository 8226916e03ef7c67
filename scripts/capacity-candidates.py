#!/usr/bin/env python3
"""Candidate capacity models, evaluated offline against the bench.

scripts/capacity-accuracy.sh with RAW=DIR keeps, per setting, every 5 s
scrape of its two daemons (capacity/testdata/capdump: protobuf, so the
kdcservice histograms' native buckets too), the KDC's /proc/PID/task/*/
schedstat and stat at the same moment, and the bench's report.json.
This script computes, from those light-load windows only, what each
candidate model would have estimated, beside the ceilings the bench
measured in the same run (docs/bench.md, "The live capacity estimate").

Usage: scripts/capacity-candidates.py DIR...   (one DIR per run)
"""
import json
import math
import os
import statistics
import sys

NAMES = {
    'default': 'default',
    'no-last-success': '`--realm.disable-last-success`',
    'no-spake': '`--realm.no-spake`',
    'workers2': '`--realm.workers 2`, pinned',
}

# The candidates: (name, source, what it is).
CANDIDATES = [
    ('current', 'proc', "capacity.Estimate's proc source: CPU and disk waits per request over the window; tgs by least squares over its intervals"),
    ('wake-ups', 'proc', '(a) least squares of the KDC\'s run time over (AS, TGS, schedstat wake-ups) per interval; the ceiling without the wake-ups (a flooded KDC wakes 0.04-0.10 times a request)'),
    ('interval median', 'proc', '(c) the median over the intervals of the cost per request instead of the window\'s total (a burst of other work on the KDC\'s CPU left out)'),
    ('current', 'kdcservice', "capacity.Estimate's kdcservice source: service CPU and blocked time per request, plus an equal share of the CPU outside service"),
    ('service only', 'kdcservice', '(a) without the CPU outside service (the event loop, the wake-up, the receive and send calls\' own work)'),
    ('p10 + outside', 'kdcservice', '(b) the 10th percentile of the service time (native buckets) plus the outside share'),
    ('p25 + outside', 'kdcservice', '(b) the same at the 25th percentile'),
    ('median + outside', 'kdcservice', '(b) the same at the median'),
    ('warm', 'kdcservice', '(d) the warm requests alone (begun without the worker blocking since its previous reply): their service CPU and blocked time plus the gap from that reply; all requests (current) where fewer than 200 were warm'),
]


def labels(m):
    return {l['name']: l['value'] for l in m.get('label', [])}


def value(m):
    for k in ('counter', 'gauge', 'untyped'):
        if k in m:
            return float(m[k].get('value', 0))
    return 0.0


def native(h):
    """A histogram's native positive buckets: {index: count}."""
    out, idx, c, j = {}, 0, 0, 0
    deltas = [int(x) for x in h.get('positiveDelta', [])]
    for sp in h.get('positiveSpan', []):
        idx += sp.get('offset', 0)
        for _ in range(sp.get('length', 0)):
            c += deltas[j]
            j += 1
            out[idx] = out.get(idx, 0) + c
            idx += 1
    return out, int(h.get('zeroCount', 0))


def read_metrics(path):
    mfs = {mf['name']: mf.get('metric', []) for mf in json.load(open(path))}
    d = {'workers': 1}

    def total(name, **want):
        return sum(value(m) for m in mfs.get(name, []) if all(labels(m).get(k) == v for k, v in want.items()))
    d['cpu'] = total('krb5_process_cpu_seconds_total', program='krb5kdc')
    d['disk'] = total('krb5_process_disk_wait_seconds_total', program='krb5kdc')
    for q in ('as', 'tgs'):
        d['n_' + q] = total('krb5_kdc_requests_total', request=q)
    for m in mfs.get('krb5_kdc_workers', []):
        d['workers'] = max(1, int(value(m)))
    d['outside'] = total('krb5_kdc_worker_outside_service_cpu_seconds_total')
    for q in ('as', 'tgs', 'other'):
        d['warmn_' + q] = total('krb5_kdc_request_service_warm_requests_total', request=q)
        for st in ('cpu', 'blocked', 'gap'):
            d['warm_%s_%s' % (q, st)] = total('krb5_kdc_request_service_warm_seconds_total', request=q, state=st)
        for st in ('cpu', 'blocked', 'runqueue', 'stolen'):
            d['split_%s_%s' % (q, st)] = total('krb5_kdc_request_service_split_seconds_total', request=q, state=st)
        nb, z, n = {}, 0, 0.0
        for m in mfs.get('krb5_kdc_request_service_seconds', []):
            if labels(m).get('request') != q:
                continue
            h = m['histogram']
            n += float(h.get('sampleCount', 0))
            b, zz = native(h)
            z += zz
            for k, v in b.items():
                nb[k] = nb.get(k, 0) + v
        d['svcn_' + q], d['nb_' + q], d['nz_' + q] = n, nb, z
    return d


def read_sched(path):
    run = pcount = 0
    for line in open(path):
        f = line.split()
        if len(f) == 8 and f[0].isdigit():  # pid tid run_ns wait_ns pcount utime stime blkio
            run += int(f[2]) / 1e9
            pcount += int(f[4])
    return run, pcount


def scrapes(raw, setting, phase):
    out, i = [], 0
    while True:
        base = os.path.join(raw, setting, '%s-%d-' % (phase, i))
        if not os.path.exists(base + 'sched.txt'):
            return out
        s = {'proc': read_metrics(base + 'proc.json'), 'bpf': read_metrics(base + 'bpf.json')}
        s['run'], s['pcount'] = read_sched(base + 'sched.txt')
        out.append(s)
        i += 1


def rate(cpu, own, workers, cpus=1):
    """capacity's model: W processes serving one request at a time, at most P CPUs."""
    if not (cpu > 0 and own > 0):
        return float('nan')
    return min(workers / own, min(workers, cpus) / cpu)


def lstsq(rows, y):
    n = len(rows[0])
    m = [[sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * v for r, v in zip(rows, y))] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-30:
            return None
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [a - f * b for a, b in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def quantile(nb, z, q):
    tot = z + sum(nb.values())
    target, c = q * tot, z
    if tot <= 0:
        return float('nan')
    if c >= target:
        return 0.0
    for k in sorted(nb):
        if c + nb[k] >= target:  # bucket k is (2^((k-1)/8), 2^(k/8)]: interpolate exponentially
            lo, hi = 2 ** ((k - 1) / 8), 2 ** (k / 8)
            return lo * (hi / lo) ** ((target - c) / nb[k])
        c += nb[k]
    return 2 ** (max(nb) / 8)


def evaluate(raw, setting):
    A, T = scrapes(raw, setting, 'as'), scrapes(raw, setting, 'tgs')
    W = A[-1]['proc']['workers']
    est = {}
    # proc: the intervals of both phases (the daemon's 5-minute window held both).
    ivs = []
    for ss in (A, T):
        for a, b in zip(ss, ss[1:]):
            p, q = a['proc'], b['proc']
            ivs.append({'as': q['n_as'] - p['n_as'], 'tgs': q['n_tgs'] - p['n_tgs'], 'cpu': q['cpu'] - p['cpu'],
                        'disk': q['disk'] - p['disk'], 'run': b['run'] - a['run'], 'wk': b['pcount'] - a['pcount'], 'phase': ss is A})
    asx = [i for i in ivs if i['phase']]
    n = sum(i['as'] + i['tgs'] for i in asx)
    cpu, disk = sum(i['cpu'] for i in asx), sum(i['disk'] for i in asx)
    c = lstsq([[i['as'], i['tgs']] for i in ivs], [i['cpu'] for i in ivs])
    o = lstsq([[i['as'], i['tgs']] for i in ivs], [i['cpu'] + i['disk'] for i in ivs])
    est[('current', 'proc')] = (rate(cpu / n, (cpu + disk) / n, W), rate(c[1], o[1], W))
    diskper = disk / n
    w = lstsq([[i['as'], i['tgs'], i['wk']] for i in ivs], [i['run'] for i in ivs])
    est[('wake-ups', 'proc')] = (rate(w[0], w[0] + diskper, W), rate(w[1], w[1], W)) if w else (float('nan'),) * 2
    med_c = statistics.median(i['cpu'] / (i['as'] + i['tgs']) for i in asx)
    med_o = statistics.median((i['cpu'] + i['disk']) / (i['as'] + i['tgs']) for i in asx)
    tg = [i for i in ivs if not i['phase']]
    t_c = statistics.median((i['cpu'] - i['as'] * med_c) / i['tgs'] for i in tg)
    t_o = statistics.median((i['cpu'] + i['disk'] - i['as'] * med_o) / i['tgs'] for i in tg)
    est[('interval median', 'proc')] = (rate(med_c, med_o, W), rate(t_c, t_o, W))
    extra = {'wake-ups a request (as phase, tgs phase)': (round(sum(i['wk'] for i in asx) / n, 2), round(sum(i['wk'] for i in tg) / sum(i['as'] + i['tgs'] for i in tg), 2)),
             'wake-up regression, µs (as, tgs, a wake-up)': tuple(round(x * 1e6) for x in w) if w else None}
    # kdcservice: each phase's own window for its request type.
    cur, svc, qs, warm = [], [], {0.10: [], 0.25: [], 0.5: []}, []
    for ss, q in ((A, 'as'), (T, 'tgs')):
        a, b = ss[0]['bpf'], ss[-1]['bpf']
        d = {k: b[k] - a[k] for k in b if isinstance(b[k], float)}
        tot = d['svcn_as'] + d['svcn_tgs'] + d['svcn_other']
        out = d['outside'] / tot
        nq = d['svcn_' + q]
        cq, bq = d['split_%s_cpu' % q] / nq, d['split_%s_blocked' % q] / nq
        cur.append(rate(cq + out, cq + out + bq, W))
        nw = d['warmn_' + q]
        if nw >= 200:
            wc = (d['warm_%s_cpu' % q] + d['warm_%s_gap' % q]) / nw
            warm.append(rate(wc, wc + d['warm_%s_blocked' % q] / nw, W))
        else:
            warm.append(cur[-1])
        extra['warm %s requests (share), µs a warm request: cpu, blocked, gap' % q] = (int(nw), round(nw / nq, 3)) + tuple(
            round(d['warm_%s_%s' % (q, st)] / nw * 1e6) if nw else None for st in ('cpu', 'blocked', 'gap'))
        svc.append(rate(cq, cq + bq, W))
        nb = {k: b['nb_' + q].get(k, 0) - a['nb_' + q].get(k, 0) for k in b['nb_' + q]}
        z = b['nz_' + q] - a['nz_' + q]
        for p in qs:
            x = quantile(nb, z, p) + out  # service time: CPU and blocked alike
            qs[p].append(rate(x, x, W))
        extra['kdcservice µs a %s request: cpu, blocked, runqueue, stolen, outside' % q] = tuple(
            round(x * 1e6) for x in (cq, bq, d['split_%s_runqueue' % q] / nq, d['split_%s_stolen' % q] / nq, out))
    est[('current', 'kdcservice')] = tuple(cur)
    est[('service only', 'kdcservice')] = tuple(svc)
    est[('p10 + outside', 'kdcservice')] = tuple(qs[0.10])
    est[('p25 + outside', 'kdcservice')] = tuple(qs[0.25])
    est[('median + outside', 'kdcservice')] = tuple(qs[0.5])
    est[('warm', 'kdcservice')] = tuple(warm)
    rep = json.load(open(os.path.join(raw, setting, 'report.json')))
    meas = {r['request']: (r['measured_per_s'], r['own_time_ceiling_per_s']) for r in rep['capacity']['rows'] if r['source'] == 'proc'}
    return est, meas, extra


def pct(e, m):
    return 'n/a' if math.isnan(e) or not m else '%+.0f' % (100 * (e / m - 1))


def main():
    """Per candidate and setting, the estimate's error against the ceiling
    the bench measured (as, tgs) in each run (DIR) given, then how many
    (run, setting) pairs had both within ±20 %."""
    dirs = sys.argv[1:]
    runs = []  # (dir, setting, est, meas, extra)
    for raw in dirs:
        for s in NAMES:
            if os.path.exists(os.path.join(raw, s, 'report.json')):
                runs.append((raw, s) + evaluate(raw, s))
    settings = [s for s in NAMES if any(r[1] == s for r in runs)]
    print('Errors against the measured ceilings, as / tgs, in %, one pair per run (' + ', '.join(dirs) + ').')
    print()
    print('| candidate | source | ' + ' | '.join(NAMES[s] for s in settings) + ' | within ±20 % (measured) | (own-time) |')
    print('|---|---|' + '---|' * len(settings) + '---:|---:|')
    for name, src, _ in CANDIDATES:
        cells, ok, ok_own = [], 0, 0
        for s in settings:
            pairs = []
            for _, rs, est, meas, _ in runs:
                if rs != s:
                    continue
                a, t = est[(name, src)]
                pairs.append('%s / %s' % (pct(a, meas['as'][0]), pct(t, meas['tgs'][0])))
                def within(i):
                    return all(not math.isnan(e) and abs(e / m[i] - 1) <= 0.2 for e, m in ((a, meas['as']), (t, meas['tgs'])))
                ok += within(0)
                ok_own += within(1)
            cells.append('; '.join(pairs))
        print('| %s | %s | %s | %d of %d | %d of %d |' % (name, src, ' | '.join(cells), ok, len(runs), ok_own, len(runs)))
    print()
    print('| candidate | source | what |')
    print('|---|---|---|')
    for name, src, what in CANDIDATES:
        print('| %s | %s | %s |' % (name, src, what))
    print()
    for raw, s, est, meas, extra in runs:
        print('%s %s: measured as %.0f/s, tgs %.0f/s; own-time %.0f/s, %.0f/s' % (raw, s, meas['as'][0], meas['tgs'][0], meas['as'][1], meas['tgs'][1]))
        for k, v in extra.items():
            print('  %s: %s' % (k, v))


if __name__ == '__main__':
    main()
