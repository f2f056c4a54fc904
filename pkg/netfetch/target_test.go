package netfetch

import (
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestMethodTargetOutcome(t *testing.T) {
	if Method("") != "GET" || Method("post") != "POST" {
		t.Fatal(Method(""), Method("post"))
	}
	if got := Target("a", "GET", "https://x.test/", " [net.allow]"); got != "a:fetch https://x.test/ [net.allow]" {
		t.Fatal(got)
	}
	if got := Target("a", "POST", "https://x.test/"+strings.Repeat("p", 300), ""); !strings.HasPrefix(got, "a:fetch POST https://x.test/pp") || !strings.HasSuffix(got, "p...") {
		t.Fatal(got)
	}
	rec := proto.FetchRecord{URL: "http://a.test/", FinalURL: "http://a.test/", Status: 200, Bytes: 5}
	if got := Outcome(&rec); got != " => status 200 bytes 5" {
		t.Fatal(got)
	}
	rec.Truncated, rec.FinalURL = true, "http://b.test/"
	if got := Outcome(&rec); got != " => status 200 bytes 5 (truncated) from http://b.test/" {
		t.Fatal(got)
	}
}
