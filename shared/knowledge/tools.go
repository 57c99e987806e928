package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// searchSchema is knowledge_search's input schema. additionalProperties is
// false because the handler refuses unknown keys: a model that invents an
// argument hears about it rather than having it silently ignored.
var searchSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {
      "type": "string",
      "minLength": 1,
      "maxLength": %d,
      "description": "Text to look for in each line of each document, compared case-insensitively as a plain substring (no wildcards or regular expressions)."
    },
    "limit": {
      "type": "integer",
      "minimum": 1,
      "maximum": %d,
      "default": %d,
      "description": "Most matching lines to return."
    }
  },
  "required": ["query"],
  "additionalProperties": false
}`, maxQuery, MaxLimit, DefaultLimit))

// enumerateSchema is knowledge_enumerate's input schema: no arguments.
var enumerateSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// Tools returns the built-ins named in names, in that order, each once. An
// unknown name is an error wrapping [ErrUnknownTool]; no names give no
// tools. Each tool declares MCP exposure only and no gate, and is tagged
// read-only so servers can say so in their annotations.
func (i *Index) Tools(names []string) ([]tool.Tool, error) {
	var out []tool.Tool
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		var spec tool.FuncSpec
		switch name {
		case SearchTool:
			spec = tool.FuncSpec{
				Description: "Search the operator's knowledge documents (runbooks, notes, reference files) for lines containing a text, case-insensitively. " +
					"Returns {\"matches\":[{\"document\",\"line\",\"text\"}]} in document and line order, with \"truncated\": true when more lines matched than the limit. " +
					"Use knowledge_enumerate to see which documents exist.",
				InputSchema: searchSchema,
				Call:        i.callSearch,
			}
		case EnumerateTool:
			spec = tool.FuncSpec{
				Description: "List the operator's knowledge documents (runbooks, notes, reference files) with each one's size in bytes and title (its first markdown heading, else its first line). " +
					"Returns {\"documents\":[{\"name\",\"bytes\",\"title\"}]} in name order. Search them with knowledge_search.",
				InputSchema: enumerateSchema,
				Call:        i.callEnumerate,
			}
		default:
			return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknownTool, name, strings.Join(ToolNames(), ", "))
		}
		spec.Name = name
		spec.Title = strings.ReplaceAll(name, "_", " ")
		spec.Tags = []string{tool.TagReadOnly}
		spec.Exposure = tool.ExposeMCP
		spec.Confirmation = tool.ConfirmNone
		t, err := tool.NewFunc(spec)
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func (i *Index) callSearch(ctx context.Context, req tool.Request) (tool.Outcome, error) {
	args, fail := objectInput(SearchTool, req.Input, "query", "limit")
	if fail != "" {
		return tool.Failure(fail), nil
	}
	var query string
	raw, ok := args["query"]
	if !ok || isNull(raw) {
		return tool.Failure(SearchTool + ": query is required: give the text to look for"), nil
	}
	if err := json.Unmarshal(raw, &query); err != nil {
		return tool.Failure(SearchTool + ": query must be a string"), nil
	}
	if strings.TrimSpace(query) == "" {
		return tool.Failure(SearchTool + ": query must not be empty"), nil
	}
	if len(query) > maxQuery {
		return tool.Failure(fmt.Sprintf("%s: query is longer than %d bytes", SearchTool, maxQuery)), nil
	}
	limit := DefaultLimit
	if raw, ok := args["limit"]; ok && !isNull(raw) {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) {
			return tool.Failure(SearchTool + ": limit must be an integer"), nil
		}
		if f < 1 || f > MaxLimit {
			return tool.Failure(fmt.Sprintf("%s: limit must be between 1 and %d", SearchTool, MaxLimit)), nil
		}
		limit = int(f)
	}
	res, err := i.Search(ctx, query, limit)
	if err != nil {
		return tool.Outcome{}, err
	}
	return jsonOutcome(res)
}

func (i *Index) callEnumerate(ctx context.Context, req tool.Request) (tool.Outcome, error) {
	if _, fail := objectInput(EnumerateTool, req.Input); fail != "" {
		return tool.Failure(fail), nil
	}
	res, err := i.Enumerate(ctx)
	if err != nil {
		return tool.Outcome{}, err
	}
	return jsonOutcome(res)
}

// objectInput decodes a call's input as a JSON object whose keys are among
// allowed. Absent or null input is an empty object. A non-empty fail is the
// in-band message for input that does not fit.
func objectInput(name string, input json.RawMessage, allowed ...string) (args map[string]json.RawMessage, fail string) {
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || isNull(trimmed) {
		return map[string]json.RawMessage{}, ""
	}
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &args) != nil {
		return nil, name + ": input must be a JSON object"
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, fmt.Sprintf("%s: unknown argument %q: it takes no arguments", name, k)
			}
			return nil, fmt.Sprintf("%s: unknown argument %q: it takes %s", name, k, strings.Join(allowed, ", "))
		}
	}
	return args, ""
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonOutcome marshals v as an in-process tool's verbatim JSON.
func jsonOutcome(v any) (tool.Outcome, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return tool.Outcome{}, fmt.Errorf("encoding result: %w", err)
	}
	return tool.Outcome{JSON: b}, nil
}
