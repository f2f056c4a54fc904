package audit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func TestReadLastNVisibleAndFollow(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	appendSync(t, l, 10, 4)
	all := func(*Info) bool { return true }
	var seqs []uint64
	collect := func(line []byte) error { seqs = append(seqs, LineSeq(line)); return nil }

	// The last 3, oldest first.
	if err := l.Read(context.Background(), &proto.AuditLogArgs{N: 3}, all, collect, nil); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || seqs[0] != 8 || seqs[2] != 10 {
		t.Fatalf("last 3: %v", seqs)
	}
	// From a seq, what the caller may see only.
	seqs = nil
	odd := func(in *Info) bool { return in.Seq%2 == 1 }
	if err := l.Read(context.Background(), &proto.AuditLogArgs{SinceSeq: 5}, odd, collect, nil); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || seqs[0] != 5 || seqs[2] != 9 {
		t.Fatalf("since 5, odd: %v", seqs)
	}
	// A bad selection is the args' error; emit's error stops the scan.
	if err := l.Read(context.Background(), &proto.AuditLogArgs{SinceTime: "yesterday-ish"}, all, collect, nil); err == nil {
		t.Fatal("a bad since was taken")
	}
	stop := errors.New("stop")
	var se *ScanError
	if err := l.Read(context.Background(), &proto.AuditLogArgs{}, all, func([]byte) error { return stop }, nil); !errors.As(err, &se) || !errors.Is(err, stop) {
		t.Fatalf("emit's error: %v", err)
	}

	// Following only new entries: each group is flushed, ctx ends it.
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan uint64, 10)
	done := make(chan error, 1)
	flushed := make(chan struct{}, 10)
	go func() {
		done <- l.Read(ctx, &proto.AuditLogArgs{OnlyNew: true, Follow: true}, all, func(line []byte) error {
			got <- LineSeq(line)
			return nil
		}, func() error { flushed <- struct{}{}; return nil })
	}()
	<-flushed // following now
	if err := l.Append(entries(10, 2)); err != nil {
		t.Fatal(err)
	}
	l.Sync()
	for _, want := range []uint64{11, 12} {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("followed %d, want %d", s, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a new entry was not followed")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
