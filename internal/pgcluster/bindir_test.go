package pgcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// Any installed version is found, the newest first: 18 (and later) too,
// not only 14 to 17 (issue 26, 13).
func TestNewestBinDir(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "14", "18", "17"} {
		d := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "initdb"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A newer version without its server binaries (a client-only install).
	if err := os.MkdirAll(filepath.Join(root, "19", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := newestBinDir(root), filepath.Join(root, "18", "bin"); got != want {
		t.Fatalf("newestBinDir = %q, want %q", got, want)
	}
	if got := newestBinDir(filepath.Join(root, "none")); got != "" {
		t.Fatalf("newestBinDir of nothing = %q", got)
	}
}
