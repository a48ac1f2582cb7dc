// Package fleetwatch keeps a long-running service's fleet file current:
// it polls the file (content hash, so an editor's rename, a touch without
// change and a Kubernetes ConfigMap's ..data symlink swap are all handled
// alike), reloads on demand (SIGHUP, an admin endpoint), validates the new
// fleet with schemas.ParseFleet and hands it to the service's appliers.
// A file that fails validation, or that an applier refuses, is logged with
// the reason and counted (ilb_fleetwatch_reloads_total{result="rejected"});
// the last good fleet stays in force. One watcher per process, shared by
// the services in it (ilb dev).
//
// # Concurrency
//
// Run owns the file state and calls the appliers one at a time, from its
// own goroutine; Current and Reload are safe for concurrent use.
package fleetwatch
