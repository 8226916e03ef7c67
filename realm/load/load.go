// Package load makes the gentle, steady load of `krb5-exporter realm
// load` on a throwaway realm, as a handful of users make it: logins and
// service tickets, now and then a wrong password, an unknown principal, an
// unknown service or a client offering RC4. It is the demo's load, bounded
// by its Config; the bench's is internal/loadgen.
//
// It is a package of its own, not part of realm, because it runs the
// project's client engine (internal/krb5), whose own tests run realm.
package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Config is what the load does; the caller bounds it.
type Config struct {
	Rate     float64       // logins per second
	Duration time.Duration // Run makes at most Rate×Duration+1 logins
	Users    int           // users that log in, user0001 on (at most the realm's)
	Tickets  int           // service tickets per login
	// Every Nth login uses a wrong password (WrongEvery), is of an unknown
	// principal (UnknownEvery), is MIT kinit offering RC4 (WeakEvery, when
	// kinit is installed); every Nth service ticket is for an unknown
	// service (SvcEvery). 0: never.
	WrongEvery, UnknownEvery, WeakEvery, SvcEvery int
	// UnknownUsers is how many distinct unknown principals take turns
	// (at least 1).
	UnknownUsers int
	// Service, if set, is the service of every ticket, instead of the
	// users' HTTP/webNNNN.
	Service *krb5.Principal
	// Poisson: logins start at random times, Rate a second on average
	// (exponential gaps), each in its own goroutine, as independent
	// clients log in; otherwise one after another at fixed ticks. A
	// login of a user whose previous one is still running waits for it.
	Poisson bool
	// Source is where the requests come from: an address, or a prefix
	// whose next address each user and unknown principal takes in turn;
	// invalid: the kernel's choice.
	Source netip.Prefix
}

// Load holds a client per user and the odd ones out.
type Load struct {
	r        *realm.Realm
	c        Config
	users    []*krb5.Client
	svcs     [][]*krb5.Service // per user
	wrong    []*krb5.Client    // per user, made at its first wrong password
	unknown  []*krb5.Client    // per unknown principal, made at its first login
	weakConf string            // krb5.conf offering RC4; "" without kinit
	// busy[i] is held by the login of user i (and of its wrong-password
	// client), busyUnknown[k] by that of unknown principal k: a client
	// serves one login at a time.
	busy, busyUnknown []sync.Mutex
	tickets           atomic.Int64 // service tickets asked, for SvcEvery
	mu                sync.Mutex
	results           map[string]int
}

// New prepares the load of c on r: its users' clients, and with
// c.WeakEvery the RC4 client profile inside r's directory.
func New(r *realm.Realm, c Config) (*Load, error) {
	g := &Load{r: r, c: c, results: map[string]int{},
		wrong: make([]*krb5.Client, c.Users), unknown: make([]*krb5.Client, c.UnknownUsers),
		busy: make([]sync.Mutex, c.Users), busyUnknown: make([]sync.Mutex, c.UnknownUsers)}
	services := max(r.Opts.Services, 0)
	for i := 1; i <= c.Users; i++ {
		cl, err := g.client(r.User(i), i-1, func(p krb5.Principal) (*krb5.Credentials, error) {
			return krb5.NewKeytabCredentials(r.UserKeytab, p)
		})
		if err != nil {
			g.Close()
			return nil, err
		}
		g.users = append(g.users, cl)
		var svcs []*krb5.Service
		if c.Service != nil {
			svcs = append(svcs, cl.PrepareService(*c.Service))
		} else {
			for k := 0; k < min(services, 3); k++ {
				sp, _ := krb5.ParsePrincipal(r.Service((i+k-1)%services+1), r.Realm)
				svcs = append(svcs, cl.PrepareService(sp))
			}
		}
		g.svcs = append(g.svcs, svcs)
	}
	if c.WeakEvery > 0 {
		var err error
		if g.weakConf, err = weakClientConf(r); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// client makes the client of name, the n-th user or unknown principal,
// from the n-th address of the source.
func (g *Load) client(name string, n int, creds func(krb5.Principal) (*krb5.Credentials, error)) (*krb5.Client, error) {
	p, err := krb5.ParsePrincipal(name, g.r.Realm)
	if err != nil {
		return nil, err
	}
	c, err := creds(p)
	if err != nil {
		return nil, err
	}
	return krb5.NewClient(krb5.Options{KDC: g.r.KDCAddr, Client: p, Credentials: c, UDPRetransmit: time.Second, LocalAddr: nthAddr(g.c.Source, n)})
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
func (g *Load) passwordClient(cs []*krb5.Client, i int, name string) (*krb5.Client, error) {
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

// Close closes the clients.
func (g *Load) Close() {
	for _, c := range slices.Concat(g.users, g.wrong, g.unknown) {
		if c != nil {
			c.Close()
		}
	}
}

// weakClientConf writes, inside the realm's directory, a copy of its krb5.conf
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

// Run makes logins at the rate until ctx ends or the count of the rate
// and duration is made; it returns how many. With Poisson the logins
// run concurrently (at most one per user and unknown principal at a
// time) and Run waits for them.
func (g *Load) Run(ctx context.Context) int {
	every := time.Duration(float64(time.Second) / g.c.Rate)
	limit := int(g.c.Rate*g.c.Duration.Seconds()) + 1
	if g.c.Poisson {
		return poisson(ctx, every, limit, func(n int) { g.login(ctx, n) })
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	n := 0
	for n < limit {
		n++
		g.login(ctx, n)
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
	}
	return n
}

// poisson runs login(1), login(2), ... up to limit, each in its own
// goroutine, after exponential gaps of mean every from a schedule (not
// from the previous start, so that the rate holds); it returns how many
// it started, once they all ended.
func poisson(ctx context.Context, every time.Duration, limit int, login func(n int)) int {
	var wg sync.WaitGroup
	defer wg.Wait()
	// At most maxInFlight logins at once (a KDC that stops answering holds
	// each for its timeouts): the schedule waits for a free place.
	slots := make(chan struct{}, maxInFlight)
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := time.Now()
	n := 0
	for n < limit {
		select {
		case <-ctx.Done():
			return n
		case <-timer.C:
		}
		select {
		case <-ctx.Done():
			return n
		case slots <- struct{}{}:
		}
		n++
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			login(n)
			<-slots
		}(n)
		next = next.Add(time.Duration(rand.ExpFloat64() * float64(every)))
		timer.Reset(time.Until(next))
	}
	return n
}

// maxInFlight bounds the concurrent logins of a Poisson load.
const maxInFlight = 256

func hits(n, every int) bool { return every > 0 && n%every == 0 }

// login is the nth login (and its service tickets).
func (g *Load) login(ctx context.Context, n int) {
	i := n % len(g.users)
	if hits(n, g.c.UnknownEvery) && !hits(n, g.c.WrongEvery) {
		k := n / g.c.UnknownEvery % len(g.unknown)
		g.busyUnknown[k].Lock()
		defer g.busyUnknown[k].Unlock()
	} else {
		g.busy[i].Lock()
		defer g.busy[i].Unlock()
	}
	switch {
	case hits(n, g.c.WrongEvery):
		if c, err := g.passwordClient(g.wrong, i, g.r.User(i+1)); err != nil {
			g.count("wrong_password", err)
		} else {
			g.as(ctx, "wrong_password", c)
		}
		return
	case hits(n, g.c.UnknownEvery):
		k := n / g.c.UnknownEvery % len(g.unknown)
		if c, err := g.passwordClient(g.unknown, k, fmt.Sprintf("demo-nosuch-user%04d", k+1)); err != nil {
			g.count("unknown_user", err)
		} else {
			g.as(ctx, "unknown_user", c)
		}
		return
	case hits(n, g.c.WeakEvery) && g.weakConf != "":
		g.kinitWeak(ctx, n)
		return
	}
	c := g.users[i]
	if !g.as(ctx, "login", c) {
		return
	}
	for k := 0; k < g.c.Tickets && len(g.svcs[i]) > 0; k++ {
		t := int(g.tickets.Add(1))
		svc := g.svcs[i][t%len(g.svcs[i])]
		kind := "ticket"
		if hits(t, g.c.SvcEvery) {
			sp, _ := krb5.ParsePrincipal(fmt.Sprintf("HTTP/nosuch%d.%s", t%50, g.r.Domain), g.r.Realm)
			svc, kind = c.PrepareService(sp), "unknown_service"
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.ServiceTicket(tctx, svc)
		cancel()
		g.count(kind, err)
	}
}

func (g *Load) as(ctx context.Context, kind string, c *krb5.Client) bool {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Login(actx)
	g.count(kind, err)
	return err == nil
}

func (g *Load) kinitWeak(ctx context.Context, n int) {
	user := g.r.User(n%len(g.users) + 1)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "kinit", "-k", "-t", g.r.UserKeytab, user)
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+g.weakConf, "KRB5CCNAME=MEMORY:load")
	_, err := cmd.CombinedOutput()
	g.count("weak_enctype_offered", err)
}

func (g *Load) count(kind string, err error) {
	if err != nil {
		kind += " " + krb5.Classify(err)
	}
	g.mu.Lock()
	g.results[kind]++
	g.mu.Unlock()
}

// Summary lists the outcomes by kind and error class, sorted: "login: 9,
// ticket: 18, wrong_password KDC_ERR_PREAUTH_FAILED: 1".
func (g *Load) Summary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var s []string
	for k, v := range g.results {
		s = append(s, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
