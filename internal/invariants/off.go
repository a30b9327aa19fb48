//go:build !invariants

package invariants

// Enabled is false: build with -tags invariants to check invariants after
// every mutation.
const Enabled = false
