package collector

// workerSlots gives the worker processes of krb5kdc -w N stable indexes,
// so that per-worker series are labelled 0..N-1 instead of by pid: a
// worker keeps its index while it lives, and a new worker takes the lowest
// free index. The highest index ever used is therefore below the largest
// number of workers alive at once, which keeps the label bounded.
type workerSlots struct {
	occupant []procID // index -> process; the zero procID marks a free slot
}

// assign returns the index of each worker (in the order given) and frees
// the slots of workers that are gone.
func (w *workerSlots) assign(workers []*kdcProc) []int {
	idx := make([]int, len(workers))
	placed := make([]bool, len(workers))
	for s, id := range w.occupant {
		found := false
		for i, p := range workers {
			if !placed[i] && p.id() == id {
				idx[i], placed[i], found = s, true, true
				break
			}
		}
		if !found {
			w.occupant[s] = procID{}
		}
	}
	for i, p := range workers {
		if placed[i] {
			continue
		}
		s := 0
		for s < len(w.occupant) && w.occupant[s] != (procID{}) {
			s++
		}
		if s == len(w.occupant) {
			w.occupant = append(w.occupant, procID{})
		}
		w.occupant[s] = p.id()
		idx[i] = s
	}
	for n := len(w.occupant); n > 0 && w.occupant[n-1] == (procID{}); n-- {
		w.occupant = w.occupant[:n-1]
	}
	return idx
}
