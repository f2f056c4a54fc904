package state

// Keys returns the number of keys in the tree ref and the bytes they hold:
// 0 for a tree that is empty or absent. An agent whose trees are all empty
// does not exist (a removed agent's trees stay in the index, empty).
func (s *Store) Keys(ref string) (n int, bytes int64) {
	a := s.agent(ref)
	if a == nil {
		return 0, 0
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.keys), a.bytes
}
