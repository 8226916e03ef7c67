package logging

import "sync"

// Changes remembers per key the outcome seen last, so that a condition
// that lasts (a dead KDC, an unreadable file, a failing collector) is
// logged when it changes, not on every try: the first failure, a failure
// unlike the one before, and the recovery. An outcome is "" for a success
// and otherwise the text that tells one failure from another (the error,
// its class). With a Limiter, a repeated outcome is logged too, once per
// the limiter's interval, and a changed one passes it (Limiter.Pass).
// Keys are the program's own names (a collector, an exchange), so the
// table stays as small as the code; a success forgets its key.
type Changes struct {
	limit *Limiter // nil: a repeat is never logged

	mu   sync.Mutex
	last map[string]string
}

// NewChanges returns Changes logging repeats through limit, or never if
// limit is nil.
func NewChanges(limit *Limiter) *Changes {
	return &Changes{limit: limit, last: map[string]string{}}
}

// Note records key's outcome and reports whether to log it: ok when it
// differs from the previous one (a first or changed failure when outcome
// is not "", a recovery from prev when it is), or, with a limiter, when
// a repeat's interval has passed. held is the count of repeats not logged
// since the last line logged (always 0 without a limiter).
func (c *Changes) Note(key, outcome string) (prev string, held int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev = c.last[key]
	if outcome == "" {
		delete(c.last, key)
	} else {
		c.last[key] = outcome
	}
	switch {
	case outcome != prev && c.limit != nil:
		return prev, c.limit.Pass(key), true
	case outcome != prev:
		return prev, 0, true
	case c.limit != nil:
		held, ok = c.limit.Allow(key)
		return prev, held, ok
	}
	return prev, 0, false
}

// Failing returns the keys whose last outcome was a failure, with it.
func (c *Changes) Failing() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]string, len(c.last))
	for k, v := range c.last {
		m[k] = v
	}
	return m
}
