// Package knowledge keeps a persistent full-text index of one directory of
// documents and serves it to MCP clients through two built-in tools:
// [SearchTool] returns the best sections for a question, ranked, each with
// a citation, and [EnumerateTool] lists the indexed documents.
//
// The index is an SQLite database (FTS5, BM25 ranking, Porter stemming)
// through the pure-Go modernc.org/sqlite driver, so binaries stay
// CGO_ENABLED=0. Documents are cut into sections: markdown at its
// headings (parsed with goldmark), each section carrying its heading path;
// other text by paragraphs; every section bounded by [MaxSectionBytes] and
// cited as relpath#ordinal. Words in a heading count more than words in
// body text. A query is words, never FTS5 syntax: see [Query]. A word found
// in more than 500 sections is ranked apart from the others, so a
// search of a large index costs milliseconds whatever it asks (see
// [Index.Search]); every search reads one snapshot of the store.
//
// The store is rebuildable data: one per identity under the user's cache
// directory unless knowledge.store says otherwise, never inside the
// directory, files 0600 in a 0700 folder, in WAL mode so searches read
// while one writer updates and two gateways can share it. An update is
// incremental ([Index.Update]): unchanged files are skipped by size and
// modification time, then by content hash; a file modified within two
// seconds of being read is read again by the next update, since a change
// within one tick of the file system's clock keeps both. [Index.Run] builds at start and
// then follows the directory with fsnotify.
//
// Only regular text files inside the directory are indexed, within
// [MaxDocumentSize] and [MaxDocuments]. Symbolic links are skipped rather
// than followed: one pointing outside would serve files the operator never
// put there. Files are opened through an [os.Root], so a file swapped for a
// link between the walk and the read still cannot escape the directory.
//
// Both tools declare MCP exposure only and are never gated: they read text
// the operator placed in the directory and change nothing. Their answers
// carry [Notice]: the text is reference data, not instructions.
//
// This package must not import shared/config: config validates the builtins
// allowlist against [ToolNames].
package knowledge
