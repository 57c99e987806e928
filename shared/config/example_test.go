package config_test

import (
	"fmt"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

func ExampleParse() {
	_, err := config.Parse([]byte(`identity: ops
expose:
  agent:
    mcp:
      adress: 0.0.0.0
`), "agent.yaml")
	fmt.Println(err)
	// Output:
	// agent.yaml:5: unknown key expose.agent.mcp.adress: did you mean address? (keys here: address, agent2agent, allowed_origins, auth, auth_token_env, builtins, confirm_over_mcp, fleet, instructions, max_concurrent_tools, max_sessions, max_tasks, policy, port, resources, session_idle_timeout, task_retention, tool_timeout, tools_page_size)
}

func ExampleConfig_Validate() {
	cfg, err := config.Parse([]byte(`identity: ops
application_path: /usr/local/bin/nats
memory: {store: kv}
expose:
  agent:
    mcp: {}
`), "agent.yaml")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Expose.Agent.MCP.MaxConcurrentTools, cfg.Expose.Agent.MCP.ToolTimeout, cfg.Expose.Agent.MCP.ConfirmOverMCP)

	warnings, err := cfg.Validate(config.ModeMCP)
	fmt.Println(warnings, err)

	warnings, err = cfg.Validate(config.ModeA2AServe)
	fmt.Println(len(warnings))
	fmt.Println(err)
	// Output:
	// 2 30s auto
	// [agent.yaml: memory has no effect when serving: served calls keep no state; remove it] <nil>
	// 1
	// agent.yaml: A2A serving is not enabled: add expose.agent.a2a.serve_tools: true
	// agent.yaml: A2A serving needs a NATS connection: add nats_context: NAME
}
