package alerts

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// exporterBuild is the krb5-exporter binary the end-to-end tests share,
// built once as users build it.
var exporterBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// exporterBinary returns the shared krb5-exporter binary, building it on
// first use.
func exporterBinary(t *testing.T) string {
	t.Helper()
	b := &exporterBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "alerts-exporter-"); b.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		b.path = filepath.Join(b.dir, "krb5-exporter")
		b.err = testutil.BuildExporter(ctx, b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if exporterBuild.dir != "" {
		os.RemoveAll(exporterBuild.dir)
	}
	os.Exit(code)
}
