// Package ops is what an operator's tooling reads from a running gateway or
// agent: liveness and readiness probes ([Health]) and Prometheus metrics
// ([Metrics]), served by [Listen] on an address of their own or mounted
// beside another handler.
//
// Metric labels are bounded by construction: a tool label is a name of the
// served set ([Metrics.SetTools]) or [OtherTool], outcomes, surfaces,
// approval answers and rejection reasons come from fixed lists, and a host
// label is one of the configured remote hosts. Nothing a caller sends can
// create a series.
//
// A nil *Metrics is valid and does nothing, so a service without a metrics
// listener pays one nil check per call.
package ops
