package server

// Working is what the server counts as being served now.
func (s *Server) Working() int32 { return s.working.Load() }
