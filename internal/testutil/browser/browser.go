// Package browser drives a real headless chromium for the tests that check
// HTML pages (chromedp): one browser started with the flags every such
// test uses, and tabs that collect what their pages log as errors or
// warnings (exceptions and Content-Security-Policy violations included).
package browser

import (
	"context"
	"sync"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Start starts chromium at bin, headless, with its profile in dataDir;
// cancel ends it.
func Start(bin, dataDir string) (ctx context.Context, cancel func(), err error) {
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(dataDir))
	bctx, cancelBrowser := chromedp.NewContext(actx)
	cancel = func() { cancelBrowser(); cancelAlloc() }
	if err := chromedp.Do(bctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return bctx, cancel, nil
}

// Tab opens a tab of the browser in parent (from Start); problems returns
// what its pages logged as errors or warnings so far.
func Tab(parent context.Context) (ctx context.Context, cancel context.CancelFunc, problems func() []string) {
	var mu sync.Mutex
	var seen []string
	ctx, cancel = chromedp.NewContext(parent, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				seen = append(seen, "console "+string(e.Type))
			}
		case *runtime.EventExceptionThrown:
			seen = append(seen, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				seen = append(seen, "log: "+e.Entry.Text)
			}
		}
	}))
	return ctx, cancel, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}
