package kdclog

import "sync"

// maxLabelLen bounds a label value taken from a log line.
const maxLabelLen = 64

// boundedLabels gives every label value an index: the known values first
// (fixed at construction), then up to maxDynamic values first seen in the
// log, then one "other" for everything after. A strange or hostile log can
// therefore add at most maxDynamic series per label; the known values are
// looked up without a lock or an allocation.
type boundedLabels struct {
	known      map[string]int
	knownNames []string
	maxDynamic int

	mu       sync.Mutex
	dyn      map[string]int
	dynNames []string // values of indexes len(knownNames)...
}

func newBoundedLabels(known []string, maxDynamic int) *boundedLabels {
	b := &boundedLabels{
		known:      make(map[string]int, len(known)),
		maxDynamic: maxDynamic,
		knownNames: known,
		dyn:        map[string]int{},
	}
	for i, k := range known {
		b.known[k] = i
	}
	return b
}

// size is the number of indexes index can return: known, dynamic, other.
func (b *boundedLabels) size() int { return len(b.known) + b.maxDynamic + 1 }

// other is the index of the overflow value "other".
func (b *boundedLabels) other() int { return len(b.known) + b.maxDynamic }

// index returns the index of v. Values that are not printable ASCII of at
// most maxLabelLen bytes go to "other" without taking a slot.
func (b *boundedLabels) index(v []byte) int {
	if i, ok := b.known[string(v)]; ok { // no allocation: map index conversion
		return i
	}
	if !plausibleLabel(v) {
		return b.other()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := b.dyn[string(v)]; ok {
		return i
	}
	if len(b.dyn) >= b.maxDynamic {
		return b.other()
	}
	i := len(b.known) + len(b.dyn)
	s := string(v)
	b.dyn[s] = i
	b.dynNames = append(b.dynNames, s)
	return i
}

// name returns the label value of index i.
func (b *boundedLabels) name(i int) string {
	if i == b.other() {
		return "other"
	}
	if i < len(b.knownNames) {
		return b.knownNames[i]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := i - len(b.knownNames); d < len(b.dynNames) {
		return b.dynNames[d]
	}
	return "other"
}

// plausibleLabel accepts short printable ASCII: MIT statuses are upper-case
// words, old releases and plugins add lower case and punctuation.
func plausibleLabel(v []byte) bool {
	if len(v) == 0 || len(v) > maxLabelLen {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
