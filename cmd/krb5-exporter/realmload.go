package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// realmLoadCmd is `krb5-exporter realm load`: a gentle, steady load on a
// throwaway realm, as a handful of users make it (logins, service
// tickets, now and then a wrong password, an unknown principal, a client
// offering RC4), for `make demo`; bounded in time and count. The faults of
// the demo are the same load with the errors made frequent, from an
// address of their own (--source) so that the attack signals see one
// offender and the steady load's logins do not recover its failures.
type realmLoadCmd struct {
	cmd                                           *kingpin.CmdClause
	dir                                           string
	rate                                          float64
	duration                                      time.Duration
	users, tickets, unknownUsers                  int
	wrongEvery, unknownEvery, weakEvery, svcEvery int
	source, service                               string
}

func addRealmLoadCommand(parent *kingpin.CmdClause) *realmLoadCmd {
	l := &realmLoadCmd{}
	c := parent.Command("load", "Run a light, steady load on the realm in --dir (logins and service tickets of a few users, now and then a failure) until --duration or Ctrl-C.")
	l.cmd = c
	c.Flag("dir", "Directory of the realm.").Required().StringVar(&l.dir)
	c.Flag("rate", "Logins per second (at most 50).").Default("3").Float64Var(&l.rate)
	c.Flag("duration", "Stop after this long (at most 24h).").Default("1h").DurationVar(&l.duration)
	c.Flag("users", "Users that log in, user0001 on (at most the realm's); the wrong passwords take turns among them too.").Default("5").IntVar(&l.users)
	c.Flag("tickets", "Service tickets per login.").Default("2").IntVar(&l.tickets)
	c.Flag("wrong-password-every", "Every Nth login uses a wrong password; 0: never.").Default("250").IntVar(&l.wrongEvery)
	c.Flag("unknown-user-every", "Every Nth login is of a principal the realm does not have; 0: never.").Default("400").IntVar(&l.unknownEvery)
	c.Flag("weak-enctype-every", "Every Nth login is MIT kinit offering RC4 after AES (needs kinit); 0: never.").Default("100").IntVar(&l.weakEvery)
	c.Flag("unknown-service-every", "Every Nth service ticket is for a service the realm does not have; 0: never.").Default("0").IntVar(&l.svcEvery)
	c.Flag("unknown-users", "How many distinct unknown principals the unknown logins take turns among (at most 1000).").Default("1").IntVar(&l.unknownUsers)
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
	switch {
	case !(l.rate > 0 && l.rate <= maxLoadRate):
		return fail(fmt.Errorf("--rate %g: want more than 0, at most %d", l.rate, maxLoadRate))
	case l.duration <= 0 || l.duration > maxLoadDuration:
		return fail(fmt.Errorf("--duration %s: want more than 0, at most %s", l.duration, maxLoadDuration))
	case l.tickets < 0 || l.tickets > maxLoadTickets:
		return fail(fmt.Errorf("--tickets %d: want 0 to %d", l.tickets, maxLoadTickets))
	case l.wrongEvery < 0 || l.unknownEvery < 0 || l.weakEvery < 0 || l.svcEvery < 0:
		return fail(errors.New("the --...-every flags must not be negative"))
	case l.unknownUsers < 1 || l.unknownUsers > maxLoadUnknown:
		return fail(fmt.Errorf("--unknown-users %d: want 1 to %d", l.unknownUsers, maxLoadUnknown))
	}
	var source netip.Prefix
	if l.source != "" {
		p, err := netip.ParsePrefix(l.source)
		if a, aerr := netip.ParseAddr(l.source); aerr == nil {
			p, err = a.Prefix(a.BitLen())
		}
		if err != nil || !p.Addr().Is4() || !p.Addr().IsLoopback() || p.Bits() < 8 {
			return fail(fmt.Errorf("--source %q: want an address or a prefix of 127.0.0.0/8 (the load stays on loopback)", l.source))
		}
		source = p.Masked()
	}
	r, err := realm.Load(l.dir)
	if err != nil {
		return fail(err)
	}
	if l.users < 1 || l.users > r.Opts.Users {
		return fail(fmt.Errorf("--users %d: the realm has %d", l.users, r.Opts.Users))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, l.duration)
	defer cancel()
	g, err := newLoadGen(r, l, source)
	if err != nil {
		return fail(err)
	}
	defer g.close()
	fmt.Fprintf(stdout, "realm load: %g logins/s of %d users with %d service tickets each against %s for %s\n", l.rate, l.users, l.tickets, r.KDCAddr, l.duration)
	n := g.run(ctx)
	fmt.Fprintf(stdout, "realm load: %d logins; %s\n", n, g.summary())
	return 0
}

// loadGen holds a client per user and the odd ones out.
type loadGen struct {
	r        *realm.Realm
	l        *realmLoadCmd
	source   netip.Prefix // invalid: the kernel's choice
	users    []*krb5.Client
	svcs     [][]*krb5.Service // per user
	wrong    []*krb5.Client    // per user, made at its first wrong password
	unknown  []*krb5.Client    // per unknown principal, made at its first login
	weakConf string            // krb5.conf offering RC4; "" without kinit
	results  map[string]int
}

func newLoadGen(r *realm.Realm, l *realmLoadCmd, source netip.Prefix) (*loadGen, error) {
	g := &loadGen{r: r, l: l, source: source, results: map[string]int{},
		wrong: make([]*krb5.Client, l.users), unknown: make([]*krb5.Client, l.unknownUsers)}
	var service krb5.Principal
	if l.service != "" {
		p, err := krb5.ParsePrincipal(l.service, r.Realm)
		if err != nil {
			return nil, fmt.Errorf("--service %q: %w", l.service, err)
		}
		service = p
	}
	services := max(r.Opts.Services, 0)
	for i := 1; i <= l.users; i++ {
		c, err := g.client(r.User(i), i-1, func(p krb5.Principal) (*krb5.Credentials, error) {
			return krb5.NewKeytabCredentials(r.UserKeytab, p)
		})
		if err != nil {
			g.close()
			return nil, err
		}
		g.users = append(g.users, c)
		var svcs []*krb5.Service
		if l.service != "" {
			svcs = append(svcs, c.PrepareService(service))
		} else {
			for k := 0; k < min(services, 3); k++ {
				sp, _ := krb5.ParsePrincipal(r.Service((i+k-1)%services+1), r.Realm)
				svcs = append(svcs, c.PrepareService(sp))
			}
		}
		g.svcs = append(g.svcs, svcs)
	}
	if l.weakEvery > 0 {
		var err error
		if g.weakConf, err = weakClientConf(r); err != nil {
			g.close()
			return nil, err
		}
	}
	return g, nil
}

// client makes the client of name, the n-th user or unknown principal,
// from the n-th address of the source.
func (g *loadGen) client(name string, n int, creds func(krb5.Principal) (*krb5.Credentials, error)) (*krb5.Client, error) {
	p, err := krb5.ParsePrincipal(name, g.r.Realm)
	if err != nil {
		return nil, err
	}
	c, err := creds(p)
	if err != nil {
		return nil, err
	}
	return krb5.NewClient(krb5.Options{KDC: g.r.KDCAddr, Client: p, Credentials: c, UDPRetransmit: time.Second, LocalAddr: nthAddr(g.source, n)})
}

// nthAddr is the n-th address of p (wrapping), or none if p is invalid.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	if !p.IsValid() {
		return netip.Addr{}
	}
	a := p.Addr()
	for range uint64(n) % (uint64(1) << (32 - p.Bits())) {
		a = a.Next()
	}
	return a
}

// passwordClient returns (*cs)[i], made for name with a wrong password at
// its first use.
func (g *loadGen) passwordClient(cs []*krb5.Client, i int, name string) (*krb5.Client, error) {
	if cs[i] == nil {
		c, err := g.client(name, i, func(p krb5.Principal) (*krb5.Credentials, error) {
			return krb5.NewPasswordCredentials("not the password", p), nil
		})
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	return cs[i], nil
}

func (g *loadGen) close() {
	for _, c := range slices.Concat(g.users, g.wrong, g.unknown) {
		if c != nil {
			c.Close()
		}
	}
}

// weakConf writes, inside the realm's directory, a copy of its krb5.conf
// whose clients offer RC4 after AES (issued tickets stay AES: the KDC has
// no RC4 key), or returns "" when kinit is not installed.
func weakClientConf(r *realm.Realm) (string, error) {
	if _, err := exec.LookPath("kinit"); err != nil {
		return "", nil
	}
	b, err := os.ReadFile(r.Krb5Conf)
	if err != nil {
		return "", err
	}
	s := regexp.MustCompile(`(?m)^(\s*(default_tkt_enctypes|default_tgs_enctypes|permitted_enctypes) = .*)$`).ReplaceAllString(string(b), "$1 arcfour-hmac")
	s = strings.Replace(s, "[libdefaults]", "[libdefaults]\n\tallow_weak_crypto = true", 1)
	path := filepath.Join(r.Dir, "krb5-load-rc4.conf")
	return path, safefile.Write(path, []byte(s), 0o644)
}

// run makes logins at the rate until ctx ends; it returns how many.
func (g *loadGen) run(ctx context.Context) int {
	every := time.Duration(float64(time.Second) / g.l.rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	limit := int(g.l.rate*g.l.duration.Seconds()) + 1
	n, t := 0, 0
	for n < limit {
		n++
		g.login(ctx, n, &t)
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
	}
	return n
}

func hits(n, every int) bool { return every > 0 && n%every == 0 }

// login is the nth login (and its service tickets).
func (g *loadGen) login(ctx context.Context, n int, t *int) {
	i := n % len(g.users)
	switch {
	case hits(n, g.l.wrongEvery):
		if c, err := g.passwordClient(g.wrong, i, g.r.User(i+1)); err != nil {
			g.count("wrong_password", err)
		} else {
			g.as(ctx, "wrong_password", c)
		}
		return
	case hits(n, g.l.unknownEvery):
		k := n / g.l.unknownEvery % len(g.unknown)
		if c, err := g.passwordClient(g.unknown, k, fmt.Sprintf("demo-nosuch-user%04d", k+1)); err != nil {
			g.count("unknown_user", err)
		} else {
			g.as(ctx, "unknown_user", c)
		}
		return
	case hits(n, g.l.weakEvery) && g.weakConf != "":
		g.kinitWeak(ctx, n)
		return
	}
	c := g.users[i]
	if !g.as(ctx, "login", c) {
		return
	}
	for k := 0; k < g.l.tickets && len(g.svcs[i]) > 0; k++ {
		*t++
		svc := g.svcs[i][*t%len(g.svcs[i])]
		kind := "ticket"
		if hits(*t, g.l.svcEvery) {
			sp, _ := krb5.ParsePrincipal(fmt.Sprintf("HTTP/nosuch%d.%s", *t%50, g.r.Domain), g.r.Realm)
			svc, kind = c.PrepareService(sp), "unknown_service"
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.ServiceTicket(tctx, svc)
		cancel()
		g.count(kind, err)
	}
}

func (g *loadGen) as(ctx context.Context, kind string, c *krb5.Client) bool {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Login(actx)
	g.count(kind, err)
	return err == nil
}

func (g *loadGen) kinitWeak(ctx context.Context, n int) {
	user := g.r.User(n%len(g.users) + 1)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "kinit", "-k", "-t", g.r.UserKeytab, user)
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+g.weakConf, "KRB5CCNAME=MEMORY:load")
	_, err := cmd.CombinedOutput()
	g.count("weak_enctype_offered", err)
}

func (g *loadGen) count(kind string, err error) {
	if err != nil {
		kind += " " + krb5.Classify(err)
	}
	g.results[kind]++
}

// summary lists the outcomes by kind, sorted.
func (g *loadGen) summary() string {
	var s []string
	for k, v := range g.results {
		s = append(s, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
