package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
)

// hutch check says what the default policy bounds, and how to lift it,
// in its text and in its JSON.
func TestCheckPrintsTheDefaultPolicysLimits(t *testing.T) {
	mem := policy.DefaultMemory()
	code, out, errOut := hutch(t, "", "check")
	for _, want := range []string{"default policy (hutch run, hutch mcp --tier isolated):", "Memory limit " + mem.String() + ". At most 1024 processes.",
		"--pids unlimited and --memory unlimited"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("check: exit %d, stderr %q, stdout lacks %q:\n%s", code, errOut, want, out)
		}
	}
	code, out, _ = hutch(t, "", "check", "--json")
	var rep struct {
		DefaultPolicy struct {
			Processes int
			Memory    policy.Size
			Summary   string
		} `json:"default_policy"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("check --json: exit %d, %v", code, err)
	}
	if d := rep.DefaultPolicy; d.Processes != policy.DefaultProcesses || d.Memory != mem || !strings.Contains(d.Summary, "At most 1024 processes.") {
		t.Errorf("check --json: default_policy %+v; want %d processes, memory %v and the summary", d, policy.DefaultProcesses, mem)
	}
}
