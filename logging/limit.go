package logging

import (
	"sync"
	"time"
)

// Limiter lets an event of each key be logged at most once per interval:
// a condition that repeats (a client aborting every scrape, a collector
// failing on every scrape) is one line per interval carrying the count of
// those held back, not a line each time. Keys are the program's own
// constants, so the table stays as small as the code.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*limitState
}

type limitState struct {
	last time.Time
	held int
}

// NewLimiter returns a Limiter passing one event per key per every.
func NewLimiter(every time.Duration) *Limiter {
	return &Limiter{every: every, now: time.Now, keys: map[string]*limitState{}}
}

// Allow reports whether an event of key may be logged now and, when it
// may, how many were held back since the last one logged.
func (l *Limiter) Allow(key string) (held int, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, seen := l.state(key)
	if seen && now.Sub(s.last) < l.every {
		s.held++
		return 0, false
	}
	held, s.held, s.last = s.held, 0, now
	return held, true
}

// Pass records an event of key logged whatever the interval (a changed
// condition is news, not a repeat): it returns how many were held back
// and starts the interval again.
func (l *Limiter) Pass(key string) (held int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, _ := l.state(key)
	held, s.held, s.last = s.held, 0, now
	return held
}

// state returns key's state, made if it was not seen; l.mu is held.
func (l *Limiter) state(key string) (s *limitState, seen bool) {
	if s = l.keys[key]; s != nil {
		return s, true
	}
	s = &limitState{}
	l.keys[key] = s
	return s, false
}
