package tests

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes what the run built when it ends: the Caddy binary
// (caddyBinary) and the peers' binaries (buildGoBinary), about 130 MB a
// run, which a developer running the tests again and again would
// otherwise pile up in the temporary directory. (A run killed by its
// -timeout still leaves them.)
func TestMain(m *testing.M) {
	code := m.Run()
	if caddyPath != "" {
		_ = os.RemoveAll(filepath.Dir(caddyPath))
	}
	goBuilds.Lock()
	dir := goBuilds.dir
	goBuilds.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
