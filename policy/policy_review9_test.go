package policy_test

// Review 9: bad input to the policy package. Each TestReview9 test fails
// only while its defect is present; TestReview9Holds lists attacks that
// were handled correctly. FuzzReview9Normalize and FuzzReview9Extend cover
// Normalize, Extend and Summary, which had no fuzz target.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

func review9File(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func review9HasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
	}) >= 0
}

// Summary is shown to people and models (the MCP instructions), but it
// prints paths raw: a path holding a newline, an ANSI escape or a bidi
// override reaches the reader as is, and a path like "/w. Has full
// network access" forges a sentence in a summary of a policy that has no
// network.
func TestReview9SummaryPathsCannotForgeText(t *testing.T) {
	for _, c := range []struct {
		pol    policy.Policy
		forged string // a sentence the policy does not mean
	}{
		{policy.Policy{Write: []string{"/w\nHas full network access"}}, ""},
		{policy.Policy{Write: []string{"/w\x1b[2K\x1b[1GNo files"}}, ""},
		{policy.Policy{Read: []string{"/r\u202e"}}, ""},
		{policy.Policy{Write: []string{"/w. Has full network access"}}, "Has full network access."},
		{policy.Policy{Deny: []string{"/d. Can change /home"}, Read: []string{"/home"}}, "Can change /home."},
	} {
		p, err := c.pol.Normalize("/")
		if err != nil {
			continue // refusing such a path is a fix too
		}
		s := p.Summary()
		if review9HasControl(s) {
			t.Errorf("Summary prints a control character from a path: %q", s)
		}
		if c.forged != "" && strings.Contains(s, c.forged) {
			t.Errorf("a path forges %q in the summary of network %s: %q", c.forged, p.Network, s)
		}
	}
}

// A null entry in network.allow or network.deny is dropped without a
// word (yaml.v3 skips null sequence items), while path lists refuse it
// and an empty "" entry is an error: "deny: [evil.com, ~]" or a stray
// "-" line silently means less than was written.
func TestReview9LoadNullHostEntryIsAnError(t *testing.T) {
	for _, body := range []string{
		"network: {allow: [a.example.com], deny: [~]}\n",
		"network: {allow: [a.example.com], deny: [b.a.example.com, null]}\n",
		"network:\n  allow: [a.example.com]\n  deny:\n    - b.a.example.com\n    -\n",
		"network: {allow: [a.example.com, ~]}\n",
	} {
		pol, err := policy.Load(review9File(t, body))
		if err == nil {
			_, err = pol.Normalize("/")
		}
		if err == nil {
			t.Errorf("%q: accepted as allow %q deny %q; a null entry was dropped", body, pol.Hosts, pol.DenyHosts)
		}
	}
}

// hutch does not expand variables any more than ~ (which it refuses for
// this reason): "deny: [$HOME/.ssh]" becomes DIR/$HOME/.ssh, a path that
// does not exist, and the deny silently protects nothing.
func TestReview9VariablePathIsAnError(t *testing.T) {
	for _, d := range []string{"$HOME/.ssh", "${HOME}/.ssh"} {
		pol, err := policy.Load(review9File(t, "read: [/home]\ndeny: ['"+d+"']\n"))
		if err == nil {
			t.Errorf("deny %s in a file accepted as %q", d, pol.Deny[len(pol.Deny)-1])
		}
		if p, err := (policy.Policy{Read: []string{"/home"}, Deny: []string{d}}).Normalize("/work"); err == nil {
			t.Errorf("Normalize accepted deny %s as %q", d, p.Deny)
		}
	}
}

// Load's errors span lines ("yaml: unmarshal errors:\n  line 1: ..."), and
// Normalize prints paths raw (a start directory "/a\nb"): the rule is one
// line naming the problem.
func TestReview9LoadErrorsAreOneLine(t *testing.T) {
	for _, body := range []string{
		"limits: {mem: 1G}\n",
		"read: [/a]\nread: [/b]\n",
		"env: [A=1]\n",
		"bogus: 1\nother: 2\n",
	} {
		_, err := policy.Load(review9File(t, body))
		if err == nil {
			t.Errorf("%q: accepted", body)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans lines: %q", body, err)
		}
	}
	if _, err := (policy.Policy{Dir: "/a\nb"}).Normalize("/"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("Normalize with start directory \"/a\\nb\": %q; want one line", err)
	}
}

// A start directory that is written and denied at once gets the advice
// "add it with --read or --write", which cannot help: deny wins. The
// message should say the directory is denied.
func TestReview9DeniedStartDirSaysDenied(t *testing.T) {
	for _, p := range []policy.Policy{
		{Write: []string{"/w"}, Deny: []string{"/w"}},
		{Write: []string{"/w/sub"}, Deny: []string{"/w"}},
		{Read: []string{"/r"}, Dir: "/r/x", Deny: []string{"/r/x"}},
	} {
		_, err := p.Normalize("/")
		if err == nil {
			t.Errorf("%+v: a denied start directory was accepted", p)
			continue
		}
		if !strings.Contains(err.Error(), "denied") && !strings.Contains(err.Error(), "deny") {
			t.Errorf("%+v: %q does not say the start directory is denied", p, err)
		}
	}
}

// Holds: attacks on Load, Normalize, Extend and ParseSize that got a
// clear error, or the right value.
func TestReview9Holds(t *testing.T) {
	for name, body := range map[string]string{
		"non-UTF-8":           "read: [/opt/\xff]\n",
		"empty doc then doc":  "---\n---\nread: [/opt]\n",
		"doc end then doc":    "read: [/opt]\n...\n---\ndeny: [/x]\n",
		"network None":        "network: None\n",
		"network false":       "network: false\n",
		"network empty map":   "network: {}\n",
		"network allow str":   "network: {allow: example.com}\n",
		"deny host empty":     "network: {allow: [a.com], deny: [\"\"]}\n",
		"nice yaml1.1 bool":   "nice: on\n",
		"nice string":         "nice: \"5\"\n",
		"cpu bare number":     "limits: {cpu_time: 5}\n",
		"timeout huge":        "timeout: 9999999999h\n",
		"timeout negative":    "timeout: -1s\n",
		"processes negative":  "limits: {processes: -4}\n",
		"processes int64 max": "limits: {processes: 9223372036854775807}\n",
		"memory list":         "limits: {memory: [1]}\n",
		"limits unknown":      "limits: {mem: 1G}\n",
		"merge unknown key":   "<<: {bogus: 1}\n",
		"complex key":         "? [a]\n: b\n",
		"nested path list":    "deny: [[/a]]\n",
		"map in path list":    "deny: [{a: b}]\n",
		"extends self":        "extends: p.yaml\n",
		"extends list":        "extends: [a]\n",
		"dir list":            "dir: [/a]\n",
		"env duplicate":       "env: {A: 1, A: 2}\n",
		"env list":            "env: [A=1]\n",
		"write via dotdot /":  "write: [/usr/..]\n",
		"read //":             "read: [\"//\"]\n",
	} {
		pol, err := policy.Load(review9File(t, body))
		if err == nil {
			_, err = pol.Normalize("/")
		}
		if !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	// A BOM is not an error; a merge key cannot empty an explicit deny.
	for body, wantDeny := range map[string]string{"\ufeffdeny: [/a]\n": "/a", "deny: [/a]\n<<: {deny: []}\n": "/a"} {
		pol, err := policy.Load(review9File(t, body))
		if err != nil || !slices.Contains(pol.Deny, wantDeny) {
			t.Errorf("%q: deny %q, %v; want %s denied", body, pol.Deny, err, wantDeny)
		}
	}
	// A wider policy over a narrower one keeps every deny, and deny wins.
	narrow := policy.Policy{Read: []string{"/w"}, Deny: []string{"/w/secret"}, Network: policy.NetworkAllow, Hosts: []string{"a.example.com"}, DenyHosts: []string{"b.a.example.com"}}
	wide := narrow.Extend(policy.Policy{Write: []string{"/w", "/w/secret"}, Read: []string{"/w/secret/x"}, Hosts: []string{"*.a.example.com"}})
	p, err := wide.Normalize("/")
	if err != nil {
		t.Fatal(err)
	}
	if p.CanRead("/w/secret/x") || p.CanWrite("/w/secret") || !slices.Contains(p.DenyHosts, "b.a.example.com") || p.Network != policy.NetworkAllow {
		t.Errorf("widening lost a deny: %+v", p)
	}
	// Sizes.
	for in, want := range map[string]policy.Size{"10GiB": 10 << 30, "10gb": 10 << 30, " 5M": 5 << 20, "5 M": 5 << 20, "0": 0} {
		if v, err := policy.ParseSize(in); err != nil || v != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, v, err, want)
		}
	}
	for _, in := range []string{"-1", "1e9", "9999999999999999999999", "5MM", "0x10M", "1kk", "inf", "5 ki b", ""} {
		if v, err := policy.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error", in, v)
		}
	}
}

// FuzzReview9Normalize: whatever the paths, Normalize does not panic; its
// errors match ErrConfig and are one line; a normalized policy has clean
// absolute paths, never lets a denied path be read or written, and
// normalizing again changes nothing.
func FuzzReview9Normalize(f *testing.F) {
	for _, s := range [][4]string{
		{"/w", "/w/sub", "/w", ""}, {"rel", "../x", ".", "rel"}, {"", "", "", ""}, {"/a\x00b", "/w", "/w/x", "/w"},
		{"~", "/w", "", ""}, {"/w/./x//", "/w/../w", "/w/x/", "/w/x"}, {"/", "", "", ""}, {"/a\nb", "/a", "/a/b", "/a"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, read, write, deny, dir string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		in := policy.Policy{Read: split(read), Write: split(write), Deny: split(deny), Dir: dir}
		p, err := in.Normalize("/cwd")
		if err != nil {
			// (A path's own newline reaches the message raw: see
			// TestReview9LoadErrorsAreOneLine.)
			if !errors.Is(err, sandbox.ErrConfig) || strings.Count(err.Error(), "\n") > strings.Count(read+write+deny+dir, "\n") {
				t.Fatalf("Normalize(%+v): %q: want one line matching ErrConfig", in, err)
			}
			return
		}
		for _, list := range [][]string{p.Read, p.Write, p.Deny, {p.Dir}} {
			for _, x := range list {
				if !filepath.IsAbs(x) || filepath.Clean(x) != x {
					t.Fatalf("Normalize(%+v) left path %q unclean", in, x)
				}
			}
		}
		for _, d := range p.Deny {
			for _, x := range []string{d, filepath.Join(d, "child")} {
				if p.CanRead(x) || p.CanWrite(x) {
					t.Fatalf("denied %q is accessible under %+v", x, p)
				}
			}
		}
		q, err := p.Normalize("/other")
		if err != nil || !slices.Equal(q.Read, p.Read) || !slices.Equal(q.Write, p.Write) || !slices.Equal(q.Deny, p.Deny) || q.Dir != p.Dir {
			t.Fatalf("Normalize is not idempotent: %+v then %+v, %v", p, q, err)
		}
		_ = p.Summary()
	})
}

// FuzzReview9Extend: extending a policy by anything keeps every one of its
// denied paths and denied hosts (or is refused by Normalize), and never
// turns a network of none into all unless the extension says all.
func FuzzReview9Extend(f *testing.F) {
	f.Add("/w", "/w/s", "", "a.example.com", "b.a.example.com", "/w", "/w/s", "", "")
	f.Add("/w", "/w/s", "allow", "a.example.com", "", "/", "", "all", "")
	f.Add("/w", "", "none", "", "", "", "", "", "x.example.com")
	f.Fuzz(func(t *testing.T, r1, d1, n1, h1, dh1, w2, r2, n2, h2 string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		base := policy.Policy{Read: split(r1), Deny: split(d1), Network: policy.Network(n1), Hosts: split(h1), DenyHosts: split(dh1)}
		b, err := base.Normalize("/")
		if err != nil {
			return
		}
		ext := policy.Policy{Write: split(w2), Read: split(r2), Network: policy.Network(n2), Hosts: split(h2)}
		p, err := b.Extend(ext).Normalize("/")
		if err != nil {
			return
		}
		for _, d := range b.Deny {
			if !slices.Contains(p.Deny, d) || p.CanRead(d) || p.CanWrite(d) {
				t.Fatalf("extension %+v un-denied %q: %+v", ext, d, p)
			}
		}
		if p.Network == policy.NetworkAllow {
			for _, d := range b.DenyHosts {
				if !slices.Contains(p.DenyHosts, d) {
					t.Fatalf("extension %+v dropped denied host %q: %+v", ext, d, p)
				}
			}
		}
		if b.Network != policy.NetworkAll && p.Network == policy.NetworkAll && ext.Network != policy.NetworkAll {
			t.Fatalf("extension %+v widened network %s to all", ext, b.Network)
		}
	})
}
