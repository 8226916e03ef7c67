package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/realm"
	"github.com/krb5-exporter/krb5-exporter/realm/load"
)

// realmLoadCmd is `krb5-exporter realm load`: a gentle, steady load on a
// throwaway realm, as a handful of users make it (logins, service
// tickets, now and then a wrong password, an unknown principal, a client
// offering RC4), for `make demo`; bounded in time and count. The faults of
// the demo are the same load with the errors made frequent, from an
// address of their own (--source) so that the attack signals see one
// offender and the steady load's logins do not recover its failures.
type realmLoadCmd struct {
	cmd             *kingpin.CmdClause
	dir             string
	cfg             load.Config
	source, service string
	arrivals        string
}

func addRealmLoadCommand(parent *kingpin.CmdClause) *realmLoadCmd {
	l := &realmLoadCmd{}
	o := &l.cfg
	c := parent.Command("load", "Run a light, steady load on the realm in --dir (logins and service tickets of a few users, now and then a failure) until --duration or Ctrl-C.")
	l.cmd = c
	c.Flag("dir", "Directory of the realm.").Required().StringVar(&l.dir)
	c.Flag("rate", "Logins per second (at most 50).").Default("3").Float64Var(&o.Rate)
	c.Flag("arrivals", "steady: one login after another at fixed intervals; poisson: each login at a random time (exponential gaps, the --rate on average) and concurrently, as independent clients arrive (at most 256 at once).").Default("steady").EnumVar(&l.arrivals, "steady", "poisson")
	c.Flag("duration", "Stop after this long (at most 24h).").Default("1h").DurationVar(&o.Duration)
	c.Flag("users", "Users that log in, user0001 on (at most the realm's); the wrong passwords take turns among them too.").Default("5").IntVar(&o.Users)
	c.Flag("tickets", "Service tickets per login.").Default("2").IntVar(&o.Tickets)
	c.Flag("wrong-password-every", "Every Nth login uses a wrong password; 0: never.").Default("250").IntVar(&o.WrongEvery)
	c.Flag("unknown-user-every", "Every Nth login is of a principal the realm does not have; 0: never.").Default("400").IntVar(&o.UnknownEvery)
	c.Flag("weak-enctype-every", "Every Nth login is MIT kinit offering RC4 after AES (needs kinit); 0: never.").Default("100").IntVar(&o.WeakEvery)
	c.Flag("unknown-service-every", "Every Nth service ticket is for a service the realm does not have; 0: never.").Default("0").IntVar(&o.SvcEvery)
	c.Flag("unknown-users", "How many distinct unknown principals the unknown logins take turns among (at most 1000).").Default("1").IntVar(&o.UnknownUsers)
	c.Flag("service", "Ask every service ticket for this service of the realm (e.g. one created without keys) instead of the users' HTTP/webNNNN.").PlaceHolder("NAME").StringVar(&l.service)
	c.Flag("source", "Send every request from this loopback address (127.0.0.0/8), as another host would (kinit's RC4 logins excepted); or from a prefix of it (127.0.1.0/24), each user and each unknown principal from the next address in turn, as many hosts would; default: the kernel's choice.").PlaceHolder("ADDR|PREFIX").StringVar(&l.source)
	return l
}

// Bounds of the load: it is a demo, not the bench.
const (
	maxLoadRate     = 50
	maxLoadDuration = 24 * time.Hour
	maxLoadTickets  = 10
	maxLoadUnknown  = 1000
)

func (l *realmLoadCmd) run(stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "krb5-exporter: realm load: %v\n", err)
		return 1
	}
	o := &l.cfg
	switch {
	case !(o.Rate > 0 && o.Rate <= maxLoadRate):
		return fail(fmt.Errorf("--rate %g: want more than 0, at most %d", o.Rate, maxLoadRate))
	case o.Duration <= 0 || o.Duration > maxLoadDuration:
		return fail(fmt.Errorf("--duration %s: want more than 0, at most %s", o.Duration, maxLoadDuration))
	case o.Tickets < 0 || o.Tickets > maxLoadTickets:
		return fail(fmt.Errorf("--tickets %d: want 0 to %d", o.Tickets, maxLoadTickets))
	case o.WrongEvery < 0 || o.UnknownEvery < 0 || o.WeakEvery < 0 || o.SvcEvery < 0:
		return fail(errors.New("the --...-every flags must not be negative"))
	case o.UnknownUsers < 1 || o.UnknownUsers > maxLoadUnknown:
		return fail(fmt.Errorf("--unknown-users %d: want 1 to %d", o.UnknownUsers, maxLoadUnknown))
	}
	if l.source != "" {
		p, err := netip.ParsePrefix(l.source)
		if a, aerr := netip.ParseAddr(l.source); aerr == nil {
			p, err = a.Prefix(a.BitLen())
		}
		if err != nil || !p.Addr().Is4() || !p.Addr().IsLoopback() || p.Bits() < 8 {
			return fail(fmt.Errorf("--source %q: want an address or a prefix of 127.0.0.0/8 (the load stays on loopback)", l.source))
		}
		o.Source = p.Masked()
	}
	o.Poisson = l.arrivals == "poisson"
	r, err := realm.Load(l.dir)
	if err != nil {
		return fail(err)
	}
	if o.Users < 1 || o.Users > r.Opts.Users {
		return fail(fmt.Errorf("--users %d: the realm has %d", o.Users, r.Opts.Users))
	}
	if l.service != "" {
		p, err := krb5.ParsePrincipal(l.service, r.Realm)
		if err != nil {
			return fail(fmt.Errorf("--service %q: %w", l.service, err))
		}
		o.Service = &p
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	g, err := load.New(r, *o)
	if err != nil {
		return fail(err)
	}
	defer g.Close()
	fmt.Fprintf(stdout, "realm load: %g logins/s of %d users with %d service tickets each against %s for %s\n", o.Rate, o.Users, o.Tickets, r.KDCAddr, o.Duration)
	n := g.Run(ctx)
	fmt.Fprintf(stdout, "realm load: %d logins; %s\n", n, g.Summary())
	return 0
}
