package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/agentfile"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
)

type initCmd struct {
	Application string `help:"The fisk application to serve: a path (written as an absolute path) or a name looked up on PATH (written as given)." required:"" placeholder:"PATH"`
	Identity    string `help:"The agent's identity: 1 to 64 letters, digits, _ or -." required:"" placeholder:"NAME"`
	A2A         bool   `name:"a2a" help:"Serve over A2A: expose.agent.a2a.serve_tools: true. With neither --a2a nor --mcp, both are enabled."`
	MCP         bool   `name:"mcp" help:"Serve over MCP: expose.agent.mcp. With neither --a2a nor --mcp, both are enabled."`
	// NATSContext is written only when named: A2A serving refuses a file
	// without one, and no name is right on every machine, so the file
	// otherwise carries the key commented out for the operator to fill in.
	NATSContext string   `name:"nats-context" help:"Set nats_context, which a2a-agent serve needs (unset: written commented out)." placeholder:"NAME" env:"NATS_CONTEXT"`
	ConfirmTag  []string `name:"confirm-tag" help:"Set confirm_tags: gate the commands carrying TAG as ai:confirm does (impact:rw, say). Repeat for more." placeholder:"TAG"`
	Output      string   `short:"o" help:"The file to write." default:"agent.yaml"`
	Force       bool     `help:"Overwrite the file when it exists."`
}

// Run writes the file only once everything it says is known: the
// application introspected, the commands selected, the file parsed and
// validated as the services will. Any refusal leaves the disk as it was.
func (c *initCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	if err := a2a.CheckIdentity(c.Identity); err != nil {
		return fmt.Errorf("--identity: %w", err)
	}
	if !c.Force {
		// Checked first so an operator learns before the introspection,
		// and checked again when the file is put in place.
		if _, err := os.Lstat(c.Output); err == nil {
			return errExists(c.Output)
		}
	}
	appPath, err := applicationPath(c.Application)
	if err != nil {
		return err
	}
	spec := agentfile.Spec{
		Identity:        c.Identity,
		ApplicationPath: appPath,
		NATSContext:     c.NATSContext,
		ConfirmTags:     c.ConfirmTag,
		A2A:             c.A2A || !c.MCP,
		MCP:             c.MCP || !c.A2A,
	}
	// The commands are selected by the configuration the file holds, read
	// back as the services read it, so its comments list what they serve.
	draft, err := agentfile.Render(spec, nil)
	if err != nil {
		return err
	}
	cfg, err := c.check(draft, spec, log)
	if err != nil {
		return err
	}
	app, err := fiskapp.Load(ctx, fiskapp.OptionsFrom(cfg))
	if err != nil {
		return fmt.Errorf("--application %s: %w", c.Application, err)
	}
	listing := a2aListing(cfg, app)
	data, err := agentfile.Render(spec, &agentfile.Selection{Application: app.Model.Name, Listing: listing, Loaded: app.Tools()})
	if err != nil {
		return err
	}
	if _, err := c.check(data, spec, nil); err != nil {
		return err
	}
	if spec.NATSContext != "" {
		if err := natsconn.Check(spec.NATSContext); err != nil {
			log.Warn("the nats context cannot be loaded here; a2a-agent serve will need it where it runs", "context", spec.NATSContext, "error", err)
		}
	}
	if err := writeFile(c.Output, data, c.Force); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: agent %s, %d of the %d commands of %s served over A2A; its comments say why the others are not\n",
		c.Output, c.Identity, len(listing.Served), len(listing.Served)+len(listing.Dropped), app.Model.Name)
	if spec.A2A && spec.NATSContext == "" {
		fmt.Fprintf(e.stdout, "a2a-agent serve needs nats_context: uncomment it in %s and name a context `nats context ls` lists\n", c.Output)
	}
	fmt.Fprintf(e.stdout, "check it with: a2a-agent info --config %s\n", c.Output)
	return nil
}

// check parses data as the file about to be written and validates it for
// each mode it enables, logging the warnings when log is not nil.
func (c *initCmd) check(data []byte, spec agentfile.Spec, log *slog.Logger) (*config.Config, error) {
	cfg, err := config.Parse(data, c.Output)
	if err != nil {
		return nil, fmt.Errorf("not writing %s: %w", c.Output, err)
	}
	modes := []config.Mode{config.ModeInfo}
	if spec.A2A && spec.NATSContext != "" {
		modes = append(modes, config.ModeA2AServe)
	}
	if spec.MCP {
		modes = append(modes, config.ModeMCP)
	}
	for _, m := range modes {
		warnings, err := cfg.Validate(m)
		for _, w := range warnings {
			if log != nil {
				log.Warn(w)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("not writing %s: %w", c.Output, err)
		}
	}
	return cfg, nil
}

// applicationPath is the application_path to write for --application: a
// path made absolute, so the file works from any directory, and a bare
// name kept, so it is looked up on PATH where the file is used.
func applicationPath(app string) (string, error) {
	if !strings.ContainsRune(app, filepath.Separator) {
		return app, nil
	}
	abs, err := filepath.Abs(app)
	if err != nil {
		return "", fmt.Errorf("--application %s: %w", app, err)
	}
	return abs, nil
}

func errExists(path string) error {
	return fmt.Errorf("%s exists: pass --force to overwrite it, or --output to write another file", path)
}

// writeFile puts data at path through a temporary file in the same
// directory, synced before it takes the name, so no failure leaves half a
// file and a reader sees the old file or the new one. Without force the
// temporary file is linked to path, which fails when the name is taken by
// then: an existing file is never replaced. On a file system without hard
// links it is renamed instead, once path is seen to be free.
func writeFile(path string, data []byte, force bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	// Once the file has its name this removes only the temporary one.
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		// Readable by the account a service runs as: the file names
		// variables and paths, never secrets.
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if force {
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}
	err = os.Link(tmp, path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return errExists(path)
	}
	if _, serr := os.Lstat(path); serr == nil {
		return errExists(path)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
