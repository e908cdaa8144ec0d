package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// hutch code install installs a settings file's packages into its cache
// and prints the directory; the second time it finds them there.
func TestCodeInstallPrintsTheInstalledSets(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	dir := t.TempDir()
	if err := os.Rename(testenv.Wheel(t, "hutchclidemo", "X = 1\n"), filepath.Join(dir, "wheels")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "hutch.yaml")
	if err := os.WriteFile(cfg, []byte("code: {sandbox: a, packages: {python: [hutchclidemo], pip_index: wheels, cache: cache}}\nsandboxes: {a: {}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		code, out, errs := hutch(t, "", "code", "install", "--config", cfg)
		if code != 0 || !strings.HasPrefix(out, filepath.Join(dir, "cache", "python-")) {
			t.Fatalf("hutch code install: %d %q %q", code, out, errs)
		}
		if _, err := os.Stat(filepath.Join(strings.TrimSpace(out), "hutchclidemo.py")); err != nil {
			t.Errorf("the package is not in the printed directory: %v", err)
		}
	}
}

// Without --config, or with settings that declare no code, it is a
// one-line usage error.
func TestCodeInstallUsageErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(plain, []byte("mode: auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"code", "install"}, "needs --config FILE"},
		{[]string{"code", "install", "--config", plain}, "no code: section"},
		{[]string{"code", "install", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
	} {
		code, _, errs := hutch(t, "", c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("hutch %v: %d %q; want one line with %q", c.args, code, errs, c.want)
		}
	}
}
