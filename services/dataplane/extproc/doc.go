// Package extproc serves the Gateway API Inference Extension's endpoint
// picker protocol over Envoy's external processing (ext_proc) gRPC API, so
// that an Envoy-based gateway (Istio, kgateway, Envoy Gateway, GKE) can
// ask ilb's data plane where to send each request and keep forwarding it
// itself.
//
// One ext_proc stream carries one HTTP request. The server picks with the
// data plane's picker and guardrails (dataplane.PickExternal) and answers
// with the header x-gateway-destination-endpoint and the dynamic metadata
// envoy.lb naming the engine's host:port, then its fallbacks, as an
// ordered comma-separated list. It decides on the request headers alone
// when they carry the cluster and the affinity key; otherwise it buffers
// the body (up to Config.MaxBodyBytes), derives the key from it as the
// HTTP proxy does, and streams the body back in chunks. It honours the
// gateway's subset hint, answers ImmediateResponse 503 when no engine is
// eligible and 429 when the request is shed, and reads the endpoint that
// served the request on the response path for outlier detection.
// README.md in the parent directory documents the protocol as ilb speaks
// it; deploy/envoy has an example Envoy configuration.
//
// # Concurrency
//
// Each stream is handled by the goroutine gRPC gives it and owns its
// state; shared state lives in the data plane (lock-free on the pick
// path) and in atomic counters here. Run owns the gRPC server and the
// health-status loop and stops both before it returns.
package extproc
