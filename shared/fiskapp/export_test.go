package fiskapp

import (
	"context"
	"io"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// RunArgv runs argv as [Command.Call] runs a command's, with opts (zero
// fields meaning their defaults). portable collects the output and exit
// as on systems without pidfds.
func RunArgv(ctx context.Context, opts Options, portable bool, argv []string, live io.Writer) (*tool.CommandResult, error) {
	r := newRunner(opts.withDefaults())
	r.portable = portable
	return r.run(ctx, argv, live)
}
