package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func ExampleToolNames() {
	fmt.Println(knowledge.ToolNames())
	// Output: [knowledge_enumerate knowledge_search]
}

func ExampleIndex_Tools() {
	dir, err := os.MkdirTemp("", "knowledge")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	doc := "# Restarting a server\n\nDrain it first: nats server request drain.\n"
	if err := os.WriteFile(filepath.Join(dir, "restart.md"), []byte(doc), 0o644); err != nil {
		panic(err)
	}

	idx, err := knowledge.New(dir)
	if err != nil {
		panic(err)
	}
	tools, err := idx.Tools([]string{knowledge.EnumerateTool, knowledge.SearchTool})
	if err != nil {
		panic(err)
	}
	for _, t := range tools {
		input := json.RawMessage(`{"query":"DRAIN"}`)
		if t.Name() == knowledge.EnumerateTool {
			input = nil
		}
		out, err := t.Call(context.Background(), tool.Request{Input: input})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s\n", t.Name(), out.Text())
	}
	// Output:
	// knowledge_enumerate: {"documents":[{"name":"restart.md","bytes":66,"title":"Restarting a server"}]}
	// knowledge_search: {"matches":[{"document":"restart.md","line":3,"text":"Drain it first: nats server request drain."}]}
}
