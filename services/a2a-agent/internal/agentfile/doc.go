// Package agentfile writes the agent.yaml that `a2a-agent init` starts an
// operator with: the keys init sets, the application's commands as the
// A2A server selects them (as comments), and every other key shared/config
// accepts, commented out with its default.
//
// The keys and their nesting are not written out here: [Render] walks the
// yaml tags of [config.Config], so a key added to the parser appears in
// the next file written. What each key's default is and what it does
// comes from a table of this package ([entries]); a key the table does not
// describe makes Render fail, and its tests hold the table and the parser
// to each other.
package agentfile
