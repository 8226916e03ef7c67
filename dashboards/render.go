package dashboards

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// All returns every dashboard builder by the file name its JSON has.
func All() map[string]*dashboard.DashboardBuilder {
	return map[string]*dashboard.DashboardBuilder{
		"krb5-kdc-overview.json": Overview(),
		"krb5-probes.json":       Probes(),
		"krb5-bench.json":        Bench(),
	}
}

// Render builds b and returns its JSON as committed: indented, with a
// final newline.
func Render(b *dashboard.DashboardBuilder) ([]byte, error) {
	d, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("building dashboard: %w", err)
	}
	// Panel ids in order: Grafana needs them unique for links and repeats,
	// and the builders leave them to the caller.
	for i := range d.Panels {
		id := uint32(i + 1)
		if p := d.Panels[i].Panel; p != nil {
			p.Id = &id
		}
		if r := d.Panels[i].RowPanel; r != nil {
			r.Id = id
		}
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
