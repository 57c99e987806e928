package fiskapp_test

import (
	"fmt"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

func ExampleDefaultCredentialEnv() {
	for _, name := range fiskapp.DefaultCredentialEnv() {
		fmt.Println(name)
	}
	// Output:
	// ANTHROPIC_API_KEY
	// CLAUDE_API_KEY
	// OPENAI_API_KEY
	// GEMINI_API_KEY
	// GOOGLE_API_KEY
	// AWS_SECRET_ACCESS_KEY
	// AWS_SESSION_TOKEN
	// GITHUB_TOKEN
	// GH_TOKEN
}
