package policy

import "sync"

// Cache holds the parsed policy of each agent, loaded once by Load and
// kept until Drop (its file changed). Get is safe for concurrent use.
type Cache struct {
	// Load reads and parses an agent's policy (the default policy when
	// it has none).
	Load func(agent string) (*Policy, error)
	mu   sync.RWMutex
	m    map[string]*Policy
}

// Get returns agent's policy, loading it the first time.
func (c *Cache) Get(agent string) (*Policy, error) {
	c.mu.RLock()
	p := c.m[agent]
	c.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	p, err := c.Load(agent)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*Policy{}
	}
	c.m[agent] = p
	c.mu.Unlock()
	return p, nil
}

// Bound returns what f makes of agent's policy for a caller it binds
// (not the admin): a filter of the keys or kinds the caller sees. The
// admin's is nil (all); a policy that does not load shows nothing.
func (c *Cache) Bound(agent string, admin bool, f func(*Policy) func(string) bool) func(string) bool {
	if admin {
		return nil
	}
	p, err := c.Get(agent)
	if err != nil {
		return func(string) bool { return false }
	}
	return f(p)
}

// Drop forgets agent's parsed policy after its file changed.
func (c *Cache) Drop(agent string) {
	c.mu.Lock()
	delete(c.m, agent)
	c.mu.Unlock()
}
