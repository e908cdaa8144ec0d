package ruleimport

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
)

// testdata/srt/srt-settings.json follows sandbox-runtime's published
// format (anthropic-experimental/sandbox-runtime README, "Complete
// Configuration Example" and "Configuration Options"): allowWrite becomes
// the policy's write paths, a denyWrite inside one its protect list (and
// a denyWrite naming a writable path removes it), denyRead the deny list
// unless srt re-allows paths inside it, allowRead the read list,
// allowedDomains and deniedDomains the network lists; globs, Unix
// sockets and srt-only settings are reported, and so is srt's
// read-everything default. The written policy loads (policy.Load).
func TestSRTSettingsMapToAPolicyWithTheDifferencesReported(t *testing.T) {
	const f = "testdata/srt/srt-settings.json"
	res, err := Import(SRT, []string{f}, Options{Root: "/proj", Home: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 0 {
		t.Errorf("srt settings made rules: %v", res.Rules)
	}
	p := res.Policy
	want := policy.Policy{
		Read:      []string{"/home/u/notes"},
		Write:     []string{"/proj", "/tmp"},
		Deny:      []string{"/home/u/.ssh"},
		Protect:   []string{".env", "config/production.json", "src"},
		Network:   policy.NetworkAllow,
		Hosts:     []string{"github.com", "*.github.com", "npmjs.org", "*.npmjs.org", "api.example.com:443"},
		DenyHosts: []string{"malicious.com"},
	}
	if !slices.Equal(p.Read, want.Read) || !slices.Equal(p.Write, want.Write) || !slices.Equal(p.Deny, want.Deny) ||
		!slices.Equal(p.Protect, want.Protect) || p.Network != want.Network || !slices.Equal(p.Hosts, want.Hosts) || !slices.Equal(p.DenyHosts, want.DenyHosts) {
		t.Errorf("policy:\n%+v\nwant:\n%+v", *p, want)
	}
	checkNotes(t, "reported", noteLines(res.Reported), []string{
		f + ":21: ignoreViolations: no hutch equivalent",
		f + ":24: enableWeakerNestedSandbox: no hutch equivalent",
		f + ": srt reads the whole filesystem unless denyRead says otherwise; hutch's policy reads only the system paths (/usr",
		f + ":18: allowWrite build/**: a glob; hutch's policy takes paths (srt on Linux skips it too)",
		f + ":19: denyWrite .env: hutch's protect .env holds below every writable path, not only /proj",
		f + ":19: denyWrite config/production.json: hutch's protect config/production.json holds below every writable path",
		f + ":19: denyWrite src: hutch's protect src holds below every writable path",
		f + ":19: denyWrite *.pem: a glob",
		f + ":16: denyRead **/.env: a glob; hutch's policy takes paths; for the file tools, a rule such as deny: read .env",
		f + ":16: denyRead /home: srt re-allows paths inside it (allowRead, allowWrite); hutch's deny would win over them",
		f + `:9: allowedDomains https://bad.example: bad network entry "https://bad.example": has a scheme`,
		f + ":12: allowUnixSockets: hutch has no Unix socket setting",
	})
	checkNotes(t, "mapped", noteLines(res.Mapped), []string{
		"allowWrite . -> policy write /proj", "allowWrite src/ -> policy write /proj/src", "allowWrite /tmp -> policy write /tmp",
		"denyWrite .env -> policy protect .env", "denyWrite config/production.json -> policy protect config/production.json",
		"denyWrite src -> policy write no longer lists /proj/src", "denyWrite src -> policy protect src",
		"denyWrite /etc/hosts -> nothing more to add: it is below no writable path",
		"allowRead /home/u/notes -> policy read /home/u/notes", "denyRead ~/.ssh -> policy deny /home/u/.ssh",
		"allowedDomains github.com ->", "allowedDomains *.github.com ->", "allowedDomains npmjs.org ->", "allowedDomains *.npmjs.org ->",
		"allowedDomains api.example.com:443 -> policy network allow api.example.com:443", "deniedDomains malicious.com -> policy network deny malicious.com",
	})
	// The policy written loads as hutch's policy, with these settings.
	out := filepath.Join(t.TempDir(), "policy.yaml")
	if err := WritePolicy(out, *p, false); err != nil {
		t.Fatal(err)
	}
	got, err := policy.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Write, want.Write) || !slices.Contains(got.Protected(), "config/production.json") || got.Network != policy.NetworkAllow ||
		!slices.Equal(got.Hosts, want.Hosts) || !slices.Contains(got.Deny, "/home/u/.ssh") {
		t.Errorf("loaded policy %+v", got)
	}
	if err := WritePolicy(out, *p, false); !errors.Is(err, ErrExists) {
		t.Errorf("overwrite without force: %v", err)
	}
	if err := WritePolicy(out, *p, true); err != nil {
		t.Errorf("overwrite with force: %v", err)
	}
}

// Without network settings srt allows no network: network none.
func TestSRTWithoutNetworkSettingsHasNoNetwork(t *testing.T) {
	res, err := Import(SRT, []string{"testdata/srt/nonet.json"}, Options{Root: "/proj"})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Policy; p.Network != policy.NetworkNone || !slices.Equal(p.Write, []string{"/proj"}) {
		t.Errorf("policy %+v", p)
	}
	if got := res.Summary(); got != "0 rules and 2 policy settings mapped, 1 reported" {
		t.Errorf("summary %q", got)
	}
}

// Bad srt settings are one-line errors naming the file and line.
func TestSRTBadSettingsAreOneLineErrors(t *testing.T) {
	wantOneLineErrors(t, SRT, "bad.json", []errCase{
		{"filesystem not object", `{"filesystem": []}`, "bad.json:1: filesystem is a list, not an object"},
		{"allowWrite not list", "{\"filesystem\": {\n\"allowWrite\": \".\"}}", "bad.json:2: allowWrite is a string"},
		{"network not object", `{"network": true}`, "network is true or false, not an object"},
		{"domains not strings", `{"network": {"allowedDomains": [1]}}`, "an entry is a number"},
	})
}
