package statuspage

import (
	"bytes"
	"html/template"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"

	"github.com/krb5-exporter/krb5-exporter/alerts"
)

// runbookHTML is the alerts' runbook rendered once, when first asked for:
// the page links each finding to its section (an id per alert's
// heading), served by the exporter itself, since a KDC host often cannot
// reach the web. goldmark escapes raw HTML in the Markdown (its default),
// and table alignment comes as attributes, not the inline styles the
// page's Content-Security-Policy refuses.
var runbookHTML = sync.OnceValue(func() template.HTML {
	md := goldmark.New(
		goldmark.WithExtensions(extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute))),
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	)
	var b bytes.Buffer
	if err := md.Convert(alerts.Runbook, &b); err != nil {
		return template.HTML("<p>The runbook could not be rendered: " + template.HTMLEscapeString(err.Error()) + "</p>")
	}
	return template.HTML(b.String()) // goldmark's output: raw HTML in the input is not passed through
})
