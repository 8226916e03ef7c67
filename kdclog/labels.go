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
	allowed    func(byte) bool // the characters a dynamic value may hold

	mu       sync.Mutex
	dyn      map[string]int
	dynNames []string // values of indexes len(knownNames)...
}

func newBoundedLabels(known []string, maxDynamic int, allowed func(byte) bool) *boundedLabels {
	b := &boundedLabels{
		known:      make(map[string]int, len(known)),
		maxDynamic: maxDynamic,
		allowed:    allowed,
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

// index returns the index of v. Values longer than maxLabelLen bytes or
// with a character outside the label kind's set go to "other" without
// taking a slot.
func (b *boundedLabels) index(v []byte) int {
	if i, ok := b.known[string(v)]; ok { // no allocation: map index conversion
		return i
	}
	if !validLabel(v, b.allowed) {
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

// validLabel reports whether v is a non-empty value of at most
// maxLabelLen bytes made of allowed characters only. The sets are narrow
// on purpose: a log line can be forged (logger -t krb5kdc writes to the
// same syslog file), and a principal, address or path must never become a
// label value, so '@', '.', ':' and '/' are in no set.
func validLabel(v []byte, allowed func(byte) bool) bool {
	if len(v) == 0 || len(v) > maxLabelLen {
		return false
	}
	for _, c := range v {
		if !allowed(c) {
			return false
		}
	}
	return true
}

// statusChar is the character set of MIT statuses: upper-case words
// joined by '_' or ' ' ("CLIENT LOCKED OUT", "NEEDED_PREAUTH").
func statusChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ' '
}

// statusWordChar is what the parser takes for a status at all: words of
// letters and digits. Only statusChar values become a label of their own.
func statusWordChar(c byte) bool {
	return statusChar(c) || c >= 'a' && c <= 'z'
}

// identChar is the character set of preauth module names and kadmind
// operations ("encrypted_timestamp", "kadm5_get_principal", "chpw").
func identChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}
