package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// TestPipelining sends many requests in one write and matches every reply
// to its request by id.
func TestPipelining(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	rc := d.raw(t)
	const n = 200
	var batch bytes.Buffer
	for i := 1; i <= n; i++ {
		// Saves and loads of the same key interleave: the loads must see
		// the save before them only once its reply is out, so we check
		// values in a second round.
		fmt.Fprintf(&batch, `{"id":%d,"op":"state.save","args":{"agent":"pipe","key":"k%d","value":"v%d"}}`+"\n", i, i%10, i)
	}
	if _, err := rc.c.Write(batch.Bytes()); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for i := 0; i < n; i++ {
		r := rc.reply()
		if !r.OK || seen[r.ID] || r.ID < 1 || r.ID > n {
			t.Fatalf("reply %+v (seen %v)", r, seen[r.ID])
		}
		seen[r.ID] = true
	}
	batch.Reset()
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&batch, `{"id":%d,"op":"state.load","args":{"agent":"pipe","key":"k%d"}}`+"\n", 1000+i, i)
	}
	rc.c.Write(batch.Bytes())
	for i := 0; i < 10; i++ {
		r := rc.reply()
		var rec stateRec
		json.Unmarshal(r.Result, &rec)
		k := int(r.ID - 1000)
		// Saves to one key were pipelined in order on one connection, but
		// they commit concurrently; the last one acknowledged wins, and
		// it is one of the values sent for that key.
		if !r.OK || rec.Value == nil || !strings.HasPrefix(*rec.Value, "v") {
			t.Fatalf("load k%d: %+v", k, r)
		}
	}
}

// TestAloneThenPipelined: a save that is all its connection has runs on
// the connection's reading goroutine; requests the client sends while it
// commits wait in the socket, and are then served like any pipeline, each
// with its own reply. Whatever the order of the writes, no reply is lost,
// doubled or mismatched, and every save is there after.
func TestAloneThenPipelined(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	rc := d.raw(t)
	for round := 0; round < 20; round++ {
		base := uint64(round * 1000)
		// One save alone, then, without waiting for its reply, a pipeline
		// of saves, loads and a delete behind it: sent at once in some
		// rounds, after the first has surely been read in others.
		rc.send(fmt.Sprintf(`{"id":%d,"op":"state.save","args":{"agent":"alone","key":"r%d/first","value":"v"}}`, base+1, round))
		if round%2 == 1 {
			time.Sleep(time.Millisecond)
		}
		var batch bytes.Buffer
		for i := 2; i <= 40; i++ {
			switch i % 3 {
			case 0:
				fmt.Fprintf(&batch, `{"id":%d,"op":"state.load","args":{"agent":"alone","key":"r%d/first"}}`+"\n", base+uint64(i), round)
			default:
				fmt.Fprintf(&batch, `{"id":%d,"op":"state.save","args":{"agent":"alone","key":"r%d/k%d","value":"v%d"}}`+"\n", base+uint64(i), round, i, i)
			}
		}
		if _, err := rc.c.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		seen := map[uint64]bool{}
		for range 40 {
			r := rc.reply()
			if r.ID <= base || r.ID > base+40 || seen[r.ID] {
				t.Fatalf("round %d: reply %+v (seen %v)", round, r, seen[r.ID])
			}
			// A load behind the alone save may be served before it
			// commits (replies are matched by id, not order): it finds
			// the key or ENOENT, never anything else.
			if !r.OK && !((r.ID-base)%3 == 0 && r.Error != nil && r.Error.Code == proto.ENOENT) {
				t.Fatalf("round %d: reply %+v", round, r)
			}
			seen[r.ID] = true
		}
		// A sequential client: each save alone, and read back.
		for i := range 5 {
			rc.send(fmt.Sprintf(`{"id":%d,"op":"state.save","args":{"agent":"alone","key":"seq","value":"%d.%d"}}`, base+100+uint64(i), round, i))
			if r := rc.reply(); !r.OK || r.ID != base+100+uint64(i) {
				t.Fatalf("round %d: sequential save %d: %+v", round, i, r)
			}
		}
		// A remember alone: its text must not be the read buffer, which
		// the next requests (and other connections) reuse.
		rc.send(fmt.Sprintf(`{"id":%d,"op":"mem.remember","args":{"agent":"alone","memories":[{"text":"round %d remembered alone"}]}}`, base+200, round))
		if r := rc.reply(); !r.OK || r.ID != base+200 {
			t.Fatalf("round %d: remember: %+v", round, r)
		}
	}
	c := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err := c.StateList(ctx, "alone", "", func(r proto.StateRecord) error { n++; return nil })
	// 20 rounds of a first key and 26 saved behind it, and "seq".
	if err != nil || n != 20*27+1 {
		t.Fatalf("%d keys (%v), want %d", n, err, 20*27+1)
	}
	if v, _, err := c.StateLoad(ctx, "alone", "seq"); err != nil || string(v) != "19.4" {
		t.Fatalf("seq = %q %v, want the last sequential save", v, err)
	}
	// Every value and text as sent, though the buffers they came in have
	// long been read into again.
	for round := range 20 {
		for i := 2; i <= 40; i++ {
			if i%3 == 0 {
				continue
			}
			if v, _, err := c.StateLoad(ctx, "alone", fmt.Sprintf("r%d/k%d", round, i)); err != nil || string(v) != fmt.Sprintf("v%d", i) {
				t.Fatalf("r%d/k%d = %q %v", round, i, v, err)
			}
		}
	}
	texts := map[string]bool{}
	err = c.MemList(ctx, proto.MemListArgs{Agent: "alone"}, func(m proto.MemoryRecord) error {
		texts[m.Text] = true
		return nil
	})
	if err != nil || len(texts) != 20 {
		t.Fatalf("%d distinct memories (%v), want 20", len(texts), err)
	}
	for round := range 20 {
		if want := fmt.Sprintf("round %d remembered alone", round); !texts[want] {
			t.Fatalf("no memory %q in %v", want, texts)
		}
	}
}

// TestBadInput sends every kind of bad request; each gets an error naming
// the problem, and the same connection keeps serving.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_value = \"64KiB\"\n"})
	rc := d.raw(t)
	huge := `{"id":41,"op":"state.save","args":{"agent":"ops","key":"k","value":"` + strings.Repeat("x", 200<<10) + `"}}`
	cases := []struct {
		line string
		id   uint64
		code string
		msg  string
	}{
		{`this is not json`, 0, "EBADMSG", "not a JSON object"},
		{`{"id":3,"op":"state.load","args":{"agent":"ops"`, 3, "EBADMSG", "not a JSON object"},
		{`[1,2,3]`, 0, "EBADMSG", "not a JSON object"},
		{`{"id":"seven","op":"state.load"}`, 0, "EBADMSG", `"id"`},
		{`{"id":4}`, 4, "EBADMSG", `no "op"`},
		{`{"id":5,"op":"state.frobnicate","args":{}}`, 5, "ENOSYS", `unknown op "state.frobnicate"`},
		{`{"id":6,"op":"state.load"}`, 6, "EINVAL", "missing args"},
		{`{"id":7,"op":"state.load","args":{"agent":"ops","kee":"x"}}`, 7, "EINVAL", `unknown field "kee"`},
		{`{"id":8,"op":"state.load","args":{"agent":5,"key":"x"}}`, 8, "EINVAL", "bad args"},
		{`{"id":9,"op":"state.save","args":{"agent":"Bad Name","key":"x","value":"v"}}`, 9, "EINVAL", "agent name"},
		{`{"id":10,"op":"state.save","args":{"agent":"ops","key":"../x","value":"v"}}`, 10, "EINVAL", `".."`},
		{`{"id":11,"op":"state.save","args":{"agent":"ops","key":"/etc/x","value":"v"}}`, 11, "EINVAL", "absolute"},
		{`{"id":12,"op":"state.save","args":{"agent":"ops","key":"a\u0000b","value":"v"}}`, 12, "EINVAL", "NUL"},
		{`{"id":13,"op":"state.save","args":{"agent":"ops","key":"` + strings.Repeat("a", 1100) + `","value":"v"}}`, 13, "ENAMETOOLONG", "1024"},
		{`{"id":14,"op":"state.save","args":{"agent":"ops","key":"k","value":"` + strings.Repeat("x", 70<<10) + `"}}`, 14, "E2BIG", "max_value"},
		{`{"id":15,"op":"state.save","args":{"agent":"ops","key":"k","value":"!!!","encoding":"base64"}}`, 15, "EINVAL", "base64"},
		{`{"id":16,"op":"state.save","args":{"agent":"ops","key":"k","value":"x","encoding":"rot13"}}`, 16, "EINVAL", "encoding"},
		{huge, 41, "EMSGSIZE", "max_line"},
		{`{"id":18,"op":"state.save","args":{"agent":"ops","key":"a\nb","value":"v"}}`, 18, "EINVAL", "control character"},
		{`{"id":19,"op":"state.save","args":{"agent":"ops","key":"a\u001b[2Jb","value":"v"}}`, 19, "EINVAL", "control character"},
		{`{"id":20,"op":"state.list","args":{"agent":"ops","prefix":"a\rb/"}}`, 20, "EINVAL", "control character"},
		{`{"id":17,"op":"state.load","args":{"agent":"ops","key":"` + "\xff\xfe" + `"}}`, 17, "EINVAL", "args are not valid UTF-8"},
		{`{"id":21,"op":"state.load","args":{"agent":"ops","key":"a\ud800"}}`, 21, "EINVAL", "lone surrogate"},
		{`{"id":22,"op":"state.load","op":"state.save","args":{"agent":"ops","key":"k","value":"v"}}`, 22, "EBADMSG", `"op" more than once`},
		{`{"id":23,"op":"state.save","args":{"agent":"ops","key":"k","KEY":"j","value":"v"}}`, 23, "EINVAL", `"KEY" more than once`},
		{`{"id":24,"op":"state.save","args":{"agent":"ops","key":"k"}}`, 24, "EINVAL", `no "value"`},
		{`{"id":25, "op":"state.save","args":{"agent":"ops","key":"k"}}`, 25, "EINVAL", `no "value"`},
		{"{\"id\":27,\"op\":\"state.save\",\"args\":{\"agent\":\"ops\",\"key\":\"k\",\"value\":\"v\"}, \"x\":\"\xc3\"}", 27, "EBADMSG", "request line is not valid UTF-8"},
		{`{"id":26,"op":"state.save","args":{"agent":"ops","key":"k","value":"v"},"ID":9}`, 26, "EBADMSG", `"ID" more than once`},
	}
	for _, c := range cases {
		rc.send(c.line)
		r := rc.reply()
		if r.OK || r.Error == nil || r.ID != c.id || r.Error.Code != c.code || !strings.Contains(r.Error.Message, c.msg) {
			t.Errorf("line %.60q:\n got %+v %+v\nwant id %d %s mentioning %q", c.line, r, r.Error, c.id, c.code, c.msg)
		}
		// The connection still serves.
		rc.send(`{"id":99,"op":"hello","args":{"proto":1}}`)
		if r := rc.reply(); !r.OK || r.ID != 99 {
			t.Fatalf("after %.40q the connection no longer serves: %+v", c.line, r)
		}
	}
	// Nothing of the refused requests was applied.
	rc.send(`{"id":100,"op":"state.list","args":{"agent":"ops"}}`)
	if r := rc.reply(); r.OK || r.Error == nil || r.Error.Code != "ENOENT" {
		t.Fatalf("refused saves left state behind: %+v", r)
	}
	// And the daemon serves new connections.
	c := d.client(t)
	if _, err := c.StateSave(context.Background(), "ops", "ok", []byte("fine")); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentClients runs 64 clients, each on its own connection,
// saving and loading at once.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	const clients, ops = 64, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := d.client(t)
			ctx := context.Background()
			for i := 0; i < ops; i++ {
				key := fmt.Sprintf("w%d/k%d", w, i%5)
				val := fmt.Sprintf("%d-%d", w, i)
				if _, err := c.StateSave(ctx, "crowd", key, []byte(val)); err != nil {
					errs <- err
					return
				}
				got, _, err := c.StateLoad(ctx, "crowd", key)
				if err != nil || string(got) != val {
					errs <- fmt.Errorf("client %d read %q (%v) after saving %q", w, got, err, val)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	d.client(t).StateList(context.Background(), "crowd", "", func(proto.StateRecord) error { n++; return nil })
	if n != clients*5 {
		t.Fatalf("listed %d keys, want %d", n, clients*5)
	}
}

// TestSharedClientPipelining: many goroutines share one client, so their
// calls pipeline on one connection and take turns reading it. Every call
// must get its own reply, with no call left waiting.
func TestSharedClientPipelining(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.StateSave(ctx, "shared", "base", []byte("b")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				if i%10 == 0 {
					key := fmt.Sprintf("g%d", g)
					if _, err := c.StateSave(ctx, "shared", key, []byte(key)); err != nil {
						errs <- err
						return
					}
					continue
				}
				v, rec, err := c.StateLoad(ctx, "shared", "base")
				if err != nil || string(v) != "b" || rec.Key != "base" {
					errs <- fmt.Errorf("goroutine %d call %d: %q %v", g, i, v, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A stream consumer that makes calls of its own on the same client.
	n := 0
	err := c.StateList(ctx, "shared", "", func(r proto.StateRecord) error {
		if _, _, err := c.StateLoad(ctx, "shared", r.Key); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil || n != 33 {
		t.Fatalf("nested calls in a stream: %d keys, %v", n, err)
	}
}

// TestServedWhileIdle: after its first request, a connection's quick
// requests (loads, hello, an alone save) are served by its idle wait as
// they arrive, and anything else is left to the full path. Whatever the
// requests and however the client splits its writes (across the wait's
// 2 KiB buffer, mid-line, a byte at a time, with a stream, a bad line or a
// save in a batch of loads), every request gets its one right reply.
func TestServedWhileIdle(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	rc := d.raw(t)
	load := func(id uint64, key string) string {
		return fmt.Sprintf(`{"id":%d,"op":"state.load","args":{"agent":"idle","key":"%s"}}`, id, key)
	}
	write := func(s string) {
		t.Helper()
		if _, err := rc.c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// want reads n replies and checks each by id: loads of "k" give its
	// value, the ids in other get their own check.
	want := func(n int, value string, other map[uint64]func(wireReply) bool) {
		t.Helper()
		seen := map[uint64]bool{}
		for len(seen) < n {
			r := rc.reply()
			if r.Item != nil {
				if _, ok := other[r.ID]; !ok {
					t.Fatalf("item for request %d: %+v", r.ID, r)
				}
				continue
			}
			if seen[r.ID] {
				t.Fatalf("second reply to %d: %+v", r.ID, r)
			}
			seen[r.ID] = true
			if check, ok := other[r.ID]; ok {
				if !check(r) {
					t.Fatalf("reply %+v", r)
				}
				continue
			}
			var rec stateRec
			if err := json.Unmarshal(r.Result, &rec); err != nil || !r.OK || rec.Key != "k" || rec.Value == nil || *rec.Value != value {
				t.Fatalf("load %d: %+v, want value %q", r.ID, r, value)
			}
		}
	}
	ok := func(r wireReply) bool { return r.OK }
	for round := range 10 {
		base := uint64(round+1) * 1000
		value := fmt.Sprintf("v%d-%s", round, strings.Repeat("x", round*50))
		// An alone save, then its load: both served in the wait.
		rc.send(fmt.Sprintf(`{"id":%d,"op":"state.save","args":{"agent":"idle","key":"k","value":"%s"}}`, base, value))
		want(1, value, map[uint64]func(wireReply) bool{base: ok})
		rc.send(load(base+1, "k"))
		want(1, value, nil)

		// 60 loads in one write: more than the wait's buffer holds, with
		// a line across its end.
		var b strings.Builder
		for i := range 60 {
			b.WriteString(load(base+10+uint64(i), "k") + "\n")
		}
		write(b.String())
		want(60, value, nil)

		// Half a line, then the rest with a load behind it.
		l := load(base+100, "k") + "\n" + load(base+101, "k") + "\n"
		write(l[:30])
		time.Sleep(20 * time.Millisecond)
		write(l[30:])
		want(2, value, nil)

		// A byte at a time.
		l = load(base+110, "k") + "\n"
		for i := range len(l) {
			write(l[i : i+1])
			if i%16 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		want(1, value, nil)

		// Loads around a stream, a line that is not JSON, a save with
		// requests behind it, a missing key and a CRLF line, in one write.
		b.Reset()
		b.WriteString(load(base+200, "k") + "\n")
		fmt.Fprintf(&b, `{"id":%d,"op":"state.list","args":{"agent":"idle"}}`+"\n", base+201)
		b.WriteString(load(base+202, "k") + "\n")
		fmt.Fprintf(&b, `{"id":%d,"op":"state.load","args":{"agent":"idle","key":}`+"\n", base+203)
		b.WriteString(load(base+204, "k") + "\n")
		fmt.Fprintf(&b, `{"id":%d,"op":"state.save","args":{"agent":"idle","key":"other","value":"o%d"}}`+"\n", base+205, round)
		b.WriteString(load(base+206, "k") + "\n")
		b.WriteString(load(base+207, "missing") + "\n")
		b.WriteString(load(base+208, "k") + "\r\n")
		write(b.String())
		want(9, value, map[uint64]func(wireReply) bool{
			base + 201: func(r wireReply) bool { return r.OK && r.Done },
			base + 203: func(r wireReply) bool { return !r.OK && r.Error != nil && r.Error.Code == proto.EBADMSG },
			base + 205: ok,
			base + 207: func(r wireReply) bool { return !r.OK && r.Error != nil && r.Error.Code == proto.ENOENT },
		})
		rc.send(fmt.Sprintf(`{"id":%d,"op":"state.load","args":{"agent":"idle","key":"other"}}`, base+300))
		r := rc.reply()
		var rec stateRec
		if json.Unmarshal(r.Result, &rec); !r.OK || r.ID != base+300 || rec.Value == nil || *rec.Value != fmt.Sprintf("o%d", round) {
			t.Fatalf("load of the pipelined save: %+v", r)
		}
	}
}

// TestServedWhileIdleEviction: a connection whose requests its idle wait
// served is idle again after each, and the first to go when its uid needs
// room; one that has sent part of a line meanwhile is busy, and is not
// taken; a shutdown ends the waits of the others.
func TestServedWhileIdleEviction(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_conns_per_uid = 3\nhello_timeout = \"60s\"\nidle_timeout = \"60s\"\n"})
	load := func(rc *rawConn, id int) {
		t.Helper()
		rc.send(fmt.Sprintf(`{"id":%d,"op":"state.load","args":{"agent":"ev","key":"none"}}`, id))
		if r := rc.reply(); r.ID != uint64(id) || r.Error == nil || r.Error.Code != proto.ENOENT {
			t.Fatalf("load %d: %+v", id, r)
		}
	}
	a, b, c := d.raw(t), d.raw(t), d.raw(t)
	for i, rc := range []*rawConn{a, b, c} {
		load(rc, 1) // the hello wait's
		load(rc, 2) // the idle wait's: served there
		if i == 0 {
			// a: part of its third request, so it is busy.
			if _, err := a.c.Write([]byte(`{"id":3,"op":"state.load",`)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A fourth connection: b, the longest idle, makes room.
	e := d.raw(t)
	load(e, 1)
	if got := lines(b.c); len(got) > 1 {
		t.Fatalf("evicted connection got %q", got)
	}
	// a finishes its request; c and e go on.
	a.send(`"args":{"agent":"ev","key":"none"}}`)
	if r := a.reply(); r.ID != 3 || r.Error == nil || r.Error.Code != proto.ENOENT {
		t.Fatalf("a's split request: %+v", r)
	}
	load(c, 3)
	load(e, 2)
	// A shutdown closes the connections waiting in their idle waits.
	start := time.Now()
	d.stop()
	for _, rc := range []*rawConn{a, c, e} {
		if got := lines(rc.c); len(got) > 0 || time.Since(start) > 10*time.Second {
			t.Fatalf("after shutdown: %q after %v", got, time.Since(start))
		}
	}
}
