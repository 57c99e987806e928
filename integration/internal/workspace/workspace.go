// Package workspace finds the fiskfleet checkout the integration commands
// (devfleet, soak) run from: they build the services from its go.work, so
// they must be started inside it.
package workspace

import (
	"fmt"
	"os"
	"path/filepath"
)

// Root returns the directory holding go.work, searched from the working
// directory up. cmd names the command in the error, so the user learns
// which program wants to be run from inside the checkout.
func Root(cmd string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run %s from inside the fiskfleet checkout (no go.work found above %s)", cmd, wd)
		}
		dir = parent
	}
}
