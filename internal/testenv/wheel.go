package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Wheel builds a wheel of one Python module, name 1.0 whose source is
// body, with /usr/bin/python3's pip (no network), into a fresh directory
// it returns: a package index on disk. A host without pip is Missing.
func Wheel(t testing.TB, name, body string) string {
	t.Helper()
	if exec.Command("/usr/bin/python3", "-c", "import setuptools, wheel").Run() != nil || exec.Command("/usr/bin/python3", "-m", "pip", "--version").Run() != nil {
		Missing(t, "pip, setuptools and wheel for /usr/bin/python3 (python3-pip; scripts/test.sh installs them)")
	}
	src, wheels := t.TempDir(), t.TempDir()
	setup := "from setuptools import setup\nsetup(name=" + `"` + name + `"` + ", version=\"1.0\", py_modules=[" + `"` + name + `"` + "])\n"
	if err := os.WriteFile(filepath.Join(src, "setup.py"), []byte(setup), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, name+".py"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", wheels, src).CombinedOutput()
	if err != nil {
		t.Fatalf("building the wheel of %s: %v\n%s", name, err, out)
	}
	return wheels
}
