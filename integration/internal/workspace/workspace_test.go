package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootFromSubdirectory(t *testing.T) {
	root, err := Root("test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Errorf("Root returned %s, which holds no go.work: %v", root, err)
	}
}

func TestRootOutsideCheckout(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := Root("soak")
	if err == nil || !strings.Contains(err.Error(), "run soak from inside the fiskfleet checkout") {
		t.Errorf("outside a checkout: got %v, want an error naming soak and the checkout", err)
	}
}
