package server

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Micro error codes for transport errors, HTTP-style as micro's own are.
const (
	codeBadRequest = "400"
	codeTooLarge   = "413"
)

// reject answers a message that cannot be decoded with a transport error.
func (s *Server) reject(r *natsbus.Request, endpoint string, err error) {
	code := codeBadRequest
	if errors.Is(err, a2a.ErrTooLarge) {
		code = codeTooLarge
	}
	s.log.Warn("rejected malformed request", "agent", s.cfg.Identity, "endpoint", endpoint, "error", err)
	if rerr := r.Reject(code, err.Error()); rerr != nil {
		s.log.Error("rejecting request", "agent", s.cfg.Identity, "endpoint", endpoint, "error", rerr)
	}
}

func (s *Server) handleDiscovery(r *natsbus.Request) {
	req := &a2a.DiscoveryRequest{}
	if err := a2a.Decode(r.Data(), req); err != nil {
		s.reject(r, "discovery", err)
		return
	}
	data, err := s.card.Reply(req, s.self)
	if err != nil {
		s.log.Error("encoding discovery reply", "agent", s.cfg.Identity, "error", err)
		return
	}
	if err := r.Reply(data); err != nil {
		s.log.Error("sending discovery reply", "agent", s.cfg.Identity, "error", err)
	}
}

// handleTool runs on the endpoint's subscription goroutine. It takes the
// concurrency slot here, before a worker starts, so a busy agent stops
// reading and the pressure reaches NATS instead of piling up in memory.
func (s *Server) handleTool(r *natsbus.Request) {
	req := &a2a.ToolRequest{}
	if err := a2a.Decode(r.Data(), req); err != nil {
		s.reject(r, "tool", err)
		return
	}
	t, ok := s.byName[req.Name]
	if !ok {
		s.log.Info("tool call", "agent", s.cfg.Identity, "tool", req.Name, "caller", req.Sender.Name, "outcome", "unknown tool")
		s.answer(r, req, &a2a.ToolReply{IsError: true, Output: fmt.Sprintf("unknown tool %q: %s serves %d tools; discover them first", req.Name, s.cfg.Identity, len(s.served))})
		return
	}
	select {
	case s.sem <- struct{}{}:
	case <-s.stopping:
		s.answer(r, req, s.stoppingReply())
		return
	}
	// Both cases above may be ready at once, and micro keeps delivering the
	// requests already buffered after Stop: admit refuses them once Stop
	// has begun, so no call starts that Stop would not wait for.
	if !s.admit() {
		<-s.sem
		s.answer(r, req, s.stoppingReply())
		return
	}
	go func() {
		defer s.inflight.Done()
		defer func() { <-s.sem }()
		s.answer(r, req, s.call(t, req))
	}()
}

// stoppingReply answers a call that arrives once Stop has begun.
func (s *Server) stoppingReply() *a2a.ToolReply {
	return &a2a.ToolReply{IsError: true, Output: fmt.Sprintf("agent %s is stopping; call again", s.cfg.Identity)}
}

// call runs one tool call under the per-call timeout and logs it once.
func (s *Server) call(t tool.Tool, req *a2a.ToolRequest) *a2a.ToolReply {
	ctx, cancel := context.WithTimeout(s.lifetime, s.cfg.Timeout)
	defer cancel()
	start := time.Now()
	out, err := t.Call(ctx, tool.Request{Input: req.Input})
	reply := &a2a.ToolReply{}
	if out.Result != nil {
		reply.Exec = &a2a.Exec{Command: out.Result.Command, ExitCode: out.Result.ExitCode, Truncated: out.Result.Truncated}
		reply.Output = out.Result.Output
	}
	outcome := "ok"
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		outcome = "timeout"
		reply.IsError = true
		reply.Output = fmt.Sprintf("tool %s timed out after %s", t.Name(), s.cfg.Timeout)
	case err != nil:
		outcome = "error"
		reply.IsError = true
		reply.Output = fmt.Sprintf("tool %s failed: %v", t.Name(), err)
	case out.IsError:
		outcome = "error"
		reply.IsError = true
		reply.Output = out.Message
	case out.Result == nil:
		reply.Output = string(out.JSON)
	case out.Result.ExitCode != 0:
		outcome = "exit"
	}
	attrs := []any{"agent", s.cfg.Identity, "tool", t.Name(), "caller", req.Sender.Name,
		"duration", time.Since(start).Round(time.Microsecond), "outcome", outcome}
	if reply.Exec != nil {
		attrs = append(attrs, "exit_code", reply.Exec.ExitCode, "command", reply.Exec.Command)
	}
	s.log.Info("tool call", attrs...)
	return reply
}

// answer stamps, encodes and sends reply exactly once. Output that makes the
// reply exceed the message cap is cut and marked truncated rather than lost
// with the whole reply.
func (s *Server) answer(r *natsbus.Request, req *a2a.ToolRequest, reply *a2a.ToolReply) {
	a2a.StampReply(reply, req, s.self)
	data, err := a2a.Encode(reply)
	for errors.Is(err, a2a.ErrTooLarge) && len(reply.Output) > 0 {
		reply.Output = cutUTF8(reply.Output, len(reply.Output)/2)
		if reply.Exec != nil {
			reply.Exec.Truncated = true
		}
		data, err = a2a.Encode(reply)
	}
	if err != nil {
		s.log.Error("encoding tool reply", "agent", s.cfg.Identity, "tool", req.Name, "error", err)
		data, err = a2a.Encode(&a2a.ToolReply{Header: reply.Header, IsError: true, Output: "reply could not be encoded: " + err.Error()})
		if err != nil {
			return
		}
	}
	if err := r.Reply(data); err != nil {
		s.log.Error("sending tool reply", "agent", s.cfg.Identity, "tool", req.Name, "error", err)
	}
}

// cutUTF8 returns at most n bytes of s without splitting a rune.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
