package kdclog

import "testing"

// The constant indexes of the hot path must name the values they stand for.
func TestFastIndexes(t *testing.T) {
	for idx, name := range map[int]string{
		idxIssue: "ISSUE", idxNeededPreauth: "NEEDED_PREAUTH", idxMorePreauth: StatusMorePreauth,
		idxPreauthFailed: "PREAUTH_FAILED", idxClientNotFound: "CLIENT_NOT_FOUND", idxLookingUpSrv: "LOOKING_UP_SERVER",
	} {
		if knownStatuses[idx] != name {
			t.Errorf("knownStatuses[%d] = %q, want %q", idx, knownStatuses[idx], name)
		}
	}
	c := newCounts()
	for _, m := range []string{"encrypted_timestamp", "spake"} {
		if c.methodIndex([]byte(m)) != c.methods.known[m] {
			t.Errorf("methodIndex(%s) disagrees with the label set", m)
		}
	}
}
