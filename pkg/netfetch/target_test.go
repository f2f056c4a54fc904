package netfetch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/policy"
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

func TestFailureAndFinish(t *testing.T) {
	pe, outcome := Failure(fmt.Errorf("check: %w", &policy.Denied{Rule: "net.allow", Reason: "x.test is not allowed"}))
	if pe.Code != proto.EPERM || pe.Message != "fetch refused: x.test is not allowed (policy rule net.allow)" || outcome != " [net.allow]" {
		t.Fatal(pe, outcome)
	}
	if pe, outcome := Failure(proto.Errorf(proto.EINVAL, "bad url")); pe.Code != proto.EINVAL || outcome != "" {
		t.Fatal(pe, outcome)
	}
	if pe, outcome := Failure(context.DeadlineExceeded); pe.Code != proto.ETIMEDOUT || outcome != " => ETIMEDOUT" {
		t.Fatal(pe, outcome)
	}

	rec := proto.FetchRecord{URL: "http://a.test/", FinalURL: "http://a.test/", Status: 200, Bytes: 5, Body: "hello", Encoding: "utf-8", Digest: strings.Repeat("ab", 32)}
	ev, tgt := Finish(&rec, "a", "r1", "GET", "http://a.test/")
	if rec.Type != proto.RecordFetch || rec.Agent != "a" || rec.Run != "r1" || rec.Text != "http://a.test/ => status 200 bytes 5" || rec.Body != "hello" {
		t.Fatalf("%+v", rec)
	}
	if ev.Body != "" || ev.Encoding != "" || ev.Text != rec.Text || ev.Agent != "a" {
		t.Fatalf("%+v", ev)
	}
	if tgt != "a:fetch http://a.test/ => status 200 bytes 5 body "+strings.Repeat("ab", 8) {
		t.Fatal(tgt)
	}
}
