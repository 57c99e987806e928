// Package tracingtest is an OTLP trace receiver for tests: one receiver
// that takes spans over both OTLP/HTTP (protobuf) and OTLP/gRPC on
// loopback, decodes them with the OTLP protobuf types, and lets a test
// wait for the spans it expects. It is imported only from _test.go files.
package tracingtest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for assertions.
type Span struct {
	// Protocol is how it arrived: "grpc" or "http/protobuf".
	Protocol string
	// Service is the resource's service.name.
	Service  string
	TraceID  string
	SpanID   string
	ParentID string
	Name     string
	// Kind is the OTLP span kind number (2 server, 3 client, 1 internal).
	Kind int32
	// Attrs are the span's attributes, every value as its string form.
	Attrs map[string]string
	// StatusCode is the OTLP status code (2 is error).
	StatusCode int32
	// Start and End are the span's times as its process's clock read
	// them; Events its events, in the order they were added.
	Start, End time.Time
	Events     []Event
}

// Event is one event of a span: its name and time.
type Event struct {
	Name string
	Time time.Time
}

// Event returns the time of the span's first event named name, and false
// when it has none.
func (s Span) Event(name string) (time.Time, bool) {
	for _, e := range s.Events {
		if e.Name == name {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// Receiver collects the spans exported to it. Its methods are safe for
// concurrent use.
type Receiver struct {
	// HTTPEndpoint is the base URL for OTEL_EXPORTER_OTLP_ENDPOINT with
	// http/protobuf: the exporter appends /v1/traces.
	HTTPEndpoint string
	// GRPCEndpoint is the URL for OTEL_EXPORTER_OTLP_ENDPOINT with grpc;
	// its http scheme tells the exporter to send without TLS.
	GRPCEndpoint string

	mu sync.Mutex // guards spans and exports
	// spans are every span received, in arrival order.
	spans []Span
	// exports counts export requests by protocol.
	exports map[string]int
	changed chan struct{}
}

// Start runs a receiver on two loopback ports until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{exports: map[string]int{}, changed: make(chan struct{})}

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tracingtest: listening for OTLP/HTTP: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() { _ = hs.Close() })
	r.HTTPEndpoint = "http://" + hl.Addr().String()

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tracingtest: listening for OTLP/gRPC: %v", err)
	}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, &grpcService{r: r})
	go func() { _ = gs.Serve(gl) }()
	t.Cleanup(gs.Stop)
	r.GRPCEndpoint = "http://" + gl.Addr().String()
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, 32<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+" is not application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	msg := &collectorpb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(data, msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add("http/protobuf", msg)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g *grpcService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	g.r.add("grpc", req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(protocol string, req *collectorpb.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = value(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range sp.GetAttributes() {
					attrs[kv.GetKey()] = value(kv.GetValue())
				}
				parent := ""
				if len(sp.GetParentSpanId()) > 0 {
					parent = hex.EncodeToString(sp.GetParentSpanId())
				}
				var events []Event
				for _, e := range sp.GetEvents() {
					events = append(events, Event{Name: e.GetName(), Time: unixNano(e.GetTimeUnixNano())})
				}
				got = append(got, Span{
					Protocol:   protocol,
					Service:    service,
					TraceID:    hex.EncodeToString(sp.GetTraceId()),
					SpanID:     hex.EncodeToString(sp.GetSpanId()),
					ParentID:   parent,
					Name:       sp.GetName(),
					Kind:       int32(sp.GetKind()),
					Attrs:      attrs,
					StatusCode: int32(sp.GetStatus().GetCode()),
					Start:      unixNano(sp.GetStartTimeUnixNano()),
					End:        unixNano(sp.GetEndTimeUnixNano()),
					Events:     events,
				})
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	r.exports[protocol]++
	close(r.changed)
	r.changed = make(chan struct{})
}

// unixNano is an OTLP timestamp as a time.
func unixNano(ns uint64) time.Time { return time.Unix(0, int64(ns)) }

// value is an attribute value's string form.
func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	}
	return fmt.Sprint(v)
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Exports returns how many export requests arrived over protocol.
func (r *Receiver) Exports(protocol string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports[protocol]
}

// WaitFor waits until done holds for the spans received, at most timeout,
// and returns them; it fails the test with what arrived when it never
// holds.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans := append([]Span(nil), r.spans...)
		changed := r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			for _, s := range spans {
				t.Logf("received: %+v", s)
			}
			t.Fatalf("tracingtest: the expected spans did not arrive within %s (%d received)", timeout, len(spans))
			return nil
		}
	}
}
