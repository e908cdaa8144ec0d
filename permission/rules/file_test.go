package rules_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
)

func TestParseNamesFileAndLineOfEveryRule(t *testing.T) {
	rs, err := rules.Parse("r.yaml", []byte("# comment\nrules:\n  - allow: shell npm test *\n  - deny: read .env\n    reason: secrets\n  - ask: edit src/**\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []rules.Rule{
		{Decision: rules.Allow, Kind: rules.KindShell, Pattern: "npm test *", Origin: rules.Origin{File: "r.yaml", Line: 3}},
		{Decision: rules.Deny, Kind: rules.KindRead, Pattern: ".env", Reason: "secrets", Origin: rules.Origin{File: "r.yaml", Line: 4}},
		{Decision: rules.Ask, Kind: rules.KindWrite, Pattern: "src/**", Origin: rules.Origin{File: "r.yaml", Line: 6}},
	}
	if !reflect.DeepEqual(rs, want) {
		t.Errorf("got %+v\nwant %+v", rs, want)
	}
}

func TestBadRulesFilesAreOneLineErrorsNamingFileLineAndFix(t *testing.T) {
	tests := []struct {
		text, want string
	}{
		{"rules:\n  - allwo: shell x\n", `r.yaml:2: unknown key "allwo" in a rule`},
		{"rule:\n  - allow: shell x\n", `r.yaml:1: unknown key "rule"`},
		{"rules:\n  - allow: shell x\n    deny: shell y\n", "r.yaml:3: a rule has one decision"},
		{"rules:\n  - reason: x\n", "r.yaml:2: a rule needs allow, ask or deny"},
		{"rules:\n  - allow: [a]\n", "r.yaml:2: allow takes text"},
		{"rules: x\n", "r.yaml:1: rules is a list"},
		{"rules:\n  - allow: shel x\n", `r.yaml:2: unknown kind "shel"`},
		{"rules:\n  - allow: shell eval x\n", "r.yaml:2: shell pattern \"eval x\": an allow rule cannot start with eval"},
		{"rules:\n  - allow: shell npm run test:*\n", `r.yaml:2: shell pattern "npm run test:*": "test:*" is not a plain word`},
		{"rules:\n  - deny: shell FOO=1 x\n", "r.yaml:2: shell pattern \"FOO=1 x\" starts with an assignment"},
		{"rules:\n  - deny: read !x\n", "r.yaml:2: path pattern \"!x\": a rule cannot negate"},
		{"rules:\n  - deny: read ../x\n", "r.yaml:2: path pattern \"../x\" has an empty, . or .. element"},
		{"rules:\n  - deny: read [a\n", `r.yaml:2: path pattern "[a": unclosed "["`},
		{"rules:\n  - deny: fetch http://x.com\n", "r.yaml:2: fetch bad network entry"},
		{"rules:\n  - deny: search x\n", "r.yaml:2: search rules match every web_search call"},
		{"rules:\n  - deny: tool\n", "r.yaml:2: a tool rule names one tool"},
		{"rules:\n - a: [\n", "r.yaml: yaml:"},
		{"rules: []\n---\nrules: []\n", "r.yaml:2: more than one YAML document"},
	}
	for _, tt := range tests {
		rs, err := rules.Parse("r.yaml", []byte(tt.text))
		if err == nil {
			_, err = rules.New(rs)
		}
		switch {
		case err == nil:
			t.Errorf("%q: no error", tt.text)
		case !errors.Is(err, permission.ErrConfig):
			t.Errorf("%q: %v does not match permission.ErrConfig", tt.text, err)
		case !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n"):
			t.Errorf("%q: %q, want one line with %q", tt.text, err, tt.want)
		}
	}
}

func TestWriteThenLoadGivesTheSameRules(t *testing.T) {
	in := []rules.Rule{
		{Decision: rules.Allow, Kind: rules.KindShell, Pattern: "npm test *", Origin: rules.Origin{File: ".claude/settings.json", Line: 7}},
		{Decision: rules.Deny, Kind: rules.KindRead, Pattern: "*.env", Reason: "secrets: never # read"},
		{Decision: rules.Ask, Kind: rules.KindFetch, Pattern: "*.example.com"},
		{Decision: rules.Deny, Kind: rules.KindSearch},
		{Decision: rules.Allow, Kind: rules.KindShell, Pattern: "*"},
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := rules.Write(path, in); err != nil {
		t.Fatal(err)
	}
	s, err := rules.Load(path)
	if err != nil {
		data, _ := os.ReadFile(path)
		t.Fatalf("%v\n%s", err, data)
	}
	got := s.Rules()
	for i := range got {
		if got[i].Origin.File != path {
			t.Errorf("rule %d origin %v", i, got[i].Origin)
		}
		got[i].Origin, in[i].Origin = rules.Origin{}, rules.Origin{}
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("got %+v\nwant %+v", got, in)
	}
	if _, err := rules.Marshal([]rules.Rule{{Decision: "maybe", Kind: rules.KindShell}}); !errors.Is(err, permission.ErrConfig) {
		t.Errorf("Marshal of a bad rule: %v", err)
	}
}

func TestLoadRefusesWhatIsNotAReadableRulesFile(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "missing.yaml"), dir} {
		if _, err := rules.Load(p); !errors.Is(err, permission.ErrConfig) {
			t.Errorf("Load(%s): %v, want ErrConfig", p, err)
		}
	}
}

// WriteFile replaces a file whole or not at all: a check that fails, or a
// directory that cannot hold the temporary file, leaves the old content
// and no temporary file behind.
func TestWriteFileIsWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("does not load back")
	if err := rules.WriteFile(path, []byte("new"), func(tmp string) error {
		if b, err := os.ReadFile(tmp); err != nil || string(b) != "new" {
			t.Errorf("the check read %q, %v", b, err)
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("a failed check: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("a failed check changed the file: %q", b)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("left behind: %v", names)
	}
	if err := rules.WriteFile(path, []byte("new"), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("written: %q", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode: %v %v", fi.Mode(), err)
	}
	if err := rules.WriteFile(filepath.Join(dir, "missing", "rules.yaml"), []byte("x"), nil); err == nil {
		t.Error("a file in a missing directory was written")
	}
}
