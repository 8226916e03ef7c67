package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// the demo are the same load with the errors made frequent.
type realmLoadCmd struct {
	cmd                                           *kingpin.CmdClause
	dir                                           string
	rate                                          float64
	duration                                      time.Duration
	users, tickets                                int
	wrongEvery, unknownEvery, weakEvery, svcEvery int
}

func addRealmLoadCommand(parent *kingpin.CmdClause) *realmLoadCmd {
	l := &realmLoadCmd{}
	c := parent.Command("load", "Run a light, steady load on the realm in --dir (logins and service tickets of a few users, now and then a failure) until --duration or Ctrl-C.")
	l.cmd = c
	c.Flag("dir", "Directory of the realm.").Required().StringVar(&l.dir)
	c.Flag("rate", "Logins per second (at most 50).").Default("3").Float64Var(&l.rate)
	c.Flag("duration", "Stop after this long (at most 24h).").Default("1h").DurationVar(&l.duration)
	c.Flag("users", "Users that log in, user0001 on (at most the realm's).").Default("5").IntVar(&l.users)
	c.Flag("tickets", "Service tickets per login.").Default("2").IntVar(&l.tickets)
	c.Flag("wrong-password-every", "Every Nth login uses a wrong password; 0: never.").Default("250").IntVar(&l.wrongEvery)
	c.Flag("unknown-user-every", "Every Nth login is of a principal the realm does not have; 0: never.").Default("400").IntVar(&l.unknownEvery)
	c.Flag("weak-enctype-every", "Every Nth login is MIT kinit offering RC4 after AES (needs kinit); 0: never.").Default("100").IntVar(&l.weakEvery)
	c.Flag("unknown-service-every", "Every Nth service ticket is for a service the realm does not have; 0: never.").Default("0").IntVar(&l.svcEvery)
	return l
}

// Bounds of the load: it is a demo, not the bench.
const (
	maxLoadRate     = 50
	maxLoadDuration = 24 * time.Hour
	maxLoadTickets  = 10
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
	g, err := newLoadGen(r, l)
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
	users    []*krb5.Client
	svcs     [][]*krb5.Service // per user
	nosuch   *krb5.Service     // per user 0's client; see ticket
	wrong    *krb5.Client
	unknown  *krb5.Client
	weakConf string // krb5.conf offering RC4; "" without kinit
	results  map[string]int
}

func newLoadGen(r *realm.Realm, l *realmLoadCmd) (*loadGen, error) {
	g := &loadGen{r: r, l: l, results: map[string]int{}}
	client := func(name string, creds func(krb5.Principal) (*krb5.Credentials, error)) (*krb5.Client, error) {
		p, err := krb5.ParsePrincipal(name, r.Realm)
		if err != nil {
			return nil, err
		}
		c, err := creds(p)
		if err != nil {
			return nil, err
		}
		return krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Client: p, Credentials: c, UDPRetransmit: time.Second})
	}
	keytab := func(p krb5.Principal) (*krb5.Credentials, error) { return krb5.NewKeytabCredentials(r.UserKeytab, p) }
	password := func(p krb5.Principal) (*krb5.Credentials, error) {
		return krb5.NewPasswordCredentials("not the password", p), nil
	}
	services := max(r.Opts.Services, 0)
	for i := 1; i <= l.users; i++ {
		c, err := client(r.User(i), keytab)
		if err != nil {
			g.close()
			return nil, err
		}
		g.users = append(g.users, c)
		var svcs []*krb5.Service
		for k := 0; k < min(services, 3); k++ {
			sp, _ := krb5.ParsePrincipal(r.Service((i+k-1)%services+1), r.Realm)
			svcs = append(svcs, c.PrepareService(sp))
		}
		g.svcs = append(g.svcs, svcs)
	}
	var err error
	if g.wrong, err = client(r.User(1), password); err != nil {
		g.close()
		return nil, err
	}
	if g.unknown, err = client("demo-nosuch-user", password); err != nil {
		g.close()
		return nil, err
	}
	if l.weakEvery > 0 {
		if g.weakConf, err = weakClientConf(r); err != nil {
			g.close()
			return nil, err
		}
	}
	return g, nil
}

func (g *loadGen) close() {
	for _, c := range append(g.users, g.wrong, g.unknown) {
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
	switch {
	case hits(n, g.l.wrongEvery):
		g.as(ctx, "wrong_password", g.wrong)
		return
	case hits(n, g.l.unknownEvery):
		g.as(ctx, "unknown_user", g.unknown)
		return
	case hits(n, g.l.weakEvery) && g.weakConf != "":
		g.kinitWeak(ctx, n)
		return
	}
	i := n % len(g.users)
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
