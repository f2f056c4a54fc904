package policy

import "testing"

func TestHome(t *testing.T) {
	text := []byte("[state]\nwrite = []\n")
	g := WithHome(text, "n1", "abc123")
	if node, v := Home(g); node != "n1" || v != "abc123" {
		t.Fatalf("Home(%q) = %q, %q; want n1, abc123", g, node, v)
	}
	if node, _ := Home(text); node != "" {
		t.Fatalf("a policy at home names home %q", node)
	}
	if !NamesHome(g) || NamesHome(text) {
		t.Fatal("NamesHome is wrong")
	}
	if _, err := Parse(g); err != nil {
		t.Fatalf("a guest's policy file does not parse: %v", err)
	}
}
