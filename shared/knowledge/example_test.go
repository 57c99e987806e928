package knowledge_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
)

func ExampleToolNames() {
	fmt.Println(knowledge.ToolNames())
	// Output: [knowledge_enumerate knowledge_search]
}

func ExampleQuery() {
	q, ok := knowledge.Query(`NEAR("drain" * -server) AND`)
	fmt.Println(q, ok)
	_, ok = knowledge.Query(`" * -`)
	fmt.Println(ok)
	// Output:
	// "near" OR "drain" OR "server" OR "and" true
	// false
}

func ExampleParseCitation() {
	name, ordinal, err := knowledge.ParseCitation("runbooks/restart.md#2")
	fmt.Println(name, ordinal, err)
	// Output: runbooks/restart.md 2 <nil>
}

func ExampleIndex_Search() {
	dir, err := os.MkdirTemp("", "knowledge")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	docs, store := filepath.Join(dir, "docs"), filepath.Join(dir, "store")
	doc := "# Restarting a server\n\n## Drain first\n\nRun nats server request drain and wait.\n\n## Start again\n\nStart the service.\n"
	if err := os.MkdirAll(docs, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(docs, "restart.md"), []byte(doc), 0o644); err != nil {
		panic(err)
	}

	idx, err := knowledge.Open(knowledge.Options{Directory: docs, Store: store})
	if err != nil {
		panic(err)
	}
	defer idx.Close()
	if _, err := idx.Update(context.Background(), nil); err != nil {
		panic(err)
	}
	res, err := idx.Search(context.Background(), "draining", 1)
	if err != nil {
		panic(err)
	}
	for _, h := range res.Hits {
		fmt.Printf("%s [%s]\n%s\n", h.Citation, h.Heading, h.Text)
	}
	// Output:
	// restart.md#2 [Restarting a server > Drain first]
	// ## Drain first
	//
	// Run nats server request drain and wait.
}
