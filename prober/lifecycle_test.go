package prober

import (
	"context"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// TestManagerRunLifeCycle: Run returns when its context ends, and the
// manager is stopped then: a later ApplyConfig starts nothing.
func TestManagerRunLifeCycle(t *testing.T) {
	m := NewManager(log.NewNopLogger(), prometheus.NewRegistry())
	if err := m.ApplyConfig(&config.Config{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyConfig(&config.Config{}); err == nil {
		t.Error("ApplyConfig after Run returned: accepted")
	}
}
