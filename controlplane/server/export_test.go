package server

// WaitersOn is how many requests wait on the object id (?wait=reconciled, ?wait=gone, a cascading
// delete): a test's signal that a wait has started, so that a write made after it tests the hub's wake
// rather than the wait's first read. A waiter subscribes before it reads, so no write after this count
// turns positive is missed.
func (s *Server) WaitersOn(id string) int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if e, ok := s.hub.subs[id]; ok {
		return e.n
	}
	return 0
}
