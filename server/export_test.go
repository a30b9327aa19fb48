//go:build linux

package server

// HoldGate holds the gate exclusively, as Check does, until the returned
// function is called: every request of every connection waits. For tests
// of a daemon that stops answering.
func HoldGate(s *Server) (release func()) {
	s.gate.Lock()
	return s.gate.Unlock
}
