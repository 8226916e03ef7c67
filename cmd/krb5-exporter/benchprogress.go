package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench"
)

// progressPrinter shows the running test: a line rewritten in place on a
// terminal, plain lines (one per test and one every 5 s) otherwise.
type progressPrinter struct {
	w     io.Writer
	suite *bench.Suite
	tty   bool

	mu   sync.Mutex
	quit chan struct{}
	done chan struct{}
}

func newProgressPrinter(w io.Writer, s *bench.Suite) *progressPrinter {
	p := &progressPrinter{w: w, suite: s}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progressPrinter) start() {
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	every := 5 * time.Second
	if p.tty {
		every = 250 * time.Millisecond
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.line()
			}
		}
	}()
}

func (p *progressPrinter) stop() {
	close(p.quit)
	<-p.done
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *progressPrinter) line() {
	test, started, ok, failed := p.suite.Progress()
	if test == "" {
		return
	}
	el := time.Since(started)
	rate := 0.0
	if el > 0 {
		rate = float64(ok) / el.Seconds()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s  %5.1fs  %7.0f req/s  %d errors", test, el.Seconds(), rate, failed)
		return
	}
	fmt.Fprintf(p.w, "bench: %s %.0fs %.0f req/s %d errors\n", test, el.Seconds(), rate, failed)
}

// TestStarted implements bench.Observer.
func (p *progressPrinter) TestStarted(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "bench: %s ...\n", name)
}

// TestDone implements bench.Observer.
func (p *progressPrinter) TestDone(name string, res bench.TestResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	msg := ""
	if res.Error != "" {
		msg = ": " + res.Error
	}
	fmt.Fprintf(p.w, "bench: %s %s in %.1fs%s\n", name, res.Status, res.Duration, msg)
}
