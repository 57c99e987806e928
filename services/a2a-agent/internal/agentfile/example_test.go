package agentfile_test

import (
	"fmt"
	"strings"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/agentfile"
)

// The keys a file sets, without the ones it writes commented out.
func ExampleRender() {
	data, err := agentfile.Render(agentfile.Spec{
		Identity:        "demo",
		ApplicationPath: "/usr/local/bin/fiskdemo",
		NATSContext:     "prod",
		A2A:             true,
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for l := range strings.Lines(string(data)) {
		if key, _, _ := strings.Cut(l, "#"); strings.TrimSpace(key) != "" {
			fmt.Println(strings.TrimRight(key, " \n"))
		}
	}
	// Output:
	// identity: demo
	// application_path: /usr/local/bin/fiskdemo
	// nats_context: prod
	// expose:
	//   agent:
	//     a2a:
	//       serve_tools: true
}
