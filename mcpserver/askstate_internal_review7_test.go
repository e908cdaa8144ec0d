package mcpserver

import "testing"

// DEFECT: every ask-mode call that is not answered leaves its question in
// the process-wide issued map, and remember prunes only entries older than
// questionTTL (30 minutes): a client that calls a privileged tool in a loop
// without answering grows the server's memory without bound (one entry per
// call, across all HTTP sessions). Right behaviour: cap the outstanding
// questions (drop the oldest past a bound, e.g. 1024), as the approval
// store caps open requests with MaxOpen.
func TestReview7OutstandingQuestionsBounded(t *testing.T) {
	issued.Lock()
	before := len(issued.m)
	issued.Unlock()
	for range 5000 {
		signState("key")
	}
	issued.Lock()
	n := len(issued.m)
	for k := range issued.m { // leave the map as other tests expect
		delete(issued.m, k)
	}
	issued.Unlock()
	if n-before > 1024 {
		t.Fatalf("%d unanswered questions kept in memory; want a bound", n-before)
	}
}
