package a2a_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

func ExampleValidIdentity() {
	for _, name := range []string{"ops-agent_1", "ops.agent", "ops*", "ops>", "ops agent", ""} {
		fmt.Printf("%q %v\n", name, a2a.ValidIdentity(name))
	}
	// Output:
	// "ops-agent_1" true
	// "ops.agent" false
	// "ops*" false
	// "ops>" false
	// "ops agent" false
	// "" false
}

func ExampleCheckIdentity() {
	fmt.Println(a2a.CheckIdentity("ops-agent"))
	fmt.Println(a2a.CheckIdentity("choria.>"))
	// Output:
	// <nil>
	// invalid identity: "choria.>" does not match ^[a-zA-Z0-9_-]{1,64}$
}

func ExampleBlock_MarshalJSON() {
	b, err := json.Marshal(a2a.Block{Content: &a2a.ToolCallBlock{ID: "call-1", Name: "uptime"}})
	fmt.Println(string(b), err)
	_, err = json.Marshal(a2a.Block{})
	fmt.Println(errors.Is(err, a2a.ErrEmptyBlock))
	// Output:
	// {"type":"tool_call","id":"call-1","name":"uptime"} <nil>
	// true
}

func ExampleRoute_String() {
	fmt.Println(a2a.RouteDiscovery, a2a.RouteTool)
	// Output: discovery tool
}
