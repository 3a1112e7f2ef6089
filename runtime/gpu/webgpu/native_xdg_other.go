//go:build !js && !linux && !freebsd

package webgpu

// ensureRuntimeDir does nothing where Mesa's Wayland probing does not run.
func ensureRuntimeDir() {}
