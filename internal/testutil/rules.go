package testutil

import "regexp"

// ShortenFor returns a Prometheus rule file's text with one duration field
// (for, keep_firing_for) of one alert set to d, or the text unchanged when
// the alert has no such field: the end-to-end tests' copies of alerts/
// fire in seconds.
func ShortenFor(text, alert, field, d string) string {
	re := regexp.MustCompile(`(?s)(- alert: ` + regexp.QuoteMeta(alert) + `\n.*?\n\s+` + regexp.QuoteMeta(field) + `: )\S+`)
	return re.ReplaceAllString(text, "${1}"+d)
}
