package integration

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// value builds a self-checking value of varying size: a torn or mixed
// value fails its checksum.
func value(w, i int) []byte {
	pad := strings.Repeat(string(rune('a'+(i%26))), rand.IntN(48<<10))
	body := fmt.Sprintf("w=%d i=%d pad=%s", w, i, pad)
	return []byte(fmt.Sprintf("%s sum=%08x", body, crc32.ChecksumIEEE([]byte(body))))
}

func checkValue(v []byte) (i int, ok bool) {
	s := string(v)
	j := strings.LastIndex(s, " sum=")
	if j < 0 {
		return 0, false
	}
	sum, err := strconv.ParseUint(s[j+5:], 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE([]byte(s[:j])) {
		return 0, false
	}
	var w int
	if _, err := fmt.Sscanf(s, "w=%d i=%d", &w, &i); err != nil {
		return 0, false
	}
	return i, true
}

// TestKill9LosesNoAcknowledgedSave kills oxiosd with SIGKILL in the middle
// of a storm of saves, several times, and checks after each restart that
// every acknowledged save is there and no value is torn.
func TestKill9LosesNoAcknowledgedSave(t *testing.T) {
	t.Parallel()
	const writers, keysPer, rounds = 16, 4, 5
	dir := shortTempDir(t)
	type keyState struct{ acked, attempted int }
	var mu sync.Mutex
	keys := map[string]*keyState{}

	for round := 0; round < rounds; round++ {
		d := startDaemon(t, daemonOpts{dir: dir})
		// Everything acknowledged in earlier rounds survived the crash.
		c := d.client(t)
		verify := func(c *client.Client) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			for key, ks := range keys {
				v, _, err := c.StateLoad(context.Background(), "storm", key)
				if ks.acked < 0 {
					continue // never acknowledged: may or may not exist
				}
				if err != nil {
					t.Fatalf("round %d: acknowledged key %s (i=%d) lost: %v", round, key, ks.acked, err)
				}
				i, ok := checkValue(v)
				if !ok {
					t.Fatalf("round %d: key %s holds a torn value (%d bytes)", round, key, len(v))
				}
				if i < ks.acked || i > ks.attempted {
					t.Fatalf("round %d: key %s holds i=%d, acknowledged %d, attempted up to %d", round, key, i, ks.acked, ks.attempted)
				}
				ks.acked, ks.attempted = i, i
			}
		}
		verify(c)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				wc, err := client.Dial(context.Background(), d.sock)
				if err != nil {
					return
				}
				defer wc.Close()
				for i := round * 1_000_000; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("w%d/k%d", w, i%keysPer)
					mu.Lock()
					ks := keys[key]
					if ks == nil {
						ks = &keyState{acked: -1}
						keys[key] = ks
					}
					ks.attempted = i
					mu.Unlock()
					if _, err := wc.StateSave(context.Background(), "storm", key, value(w, i)); err != nil {
						return // the daemon died under us
					}
					mu.Lock()
					if i > ks.acked {
						ks.acked = i
					}
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(150+rand.IntN(350)) * time.Millisecond)
		d.kill9()
		close(stop)
		wg.Wait()
		n := 0
		for _, ks := range keys {
			if ks.acked >= 0 {
				n++
			}
		}
		if n == 0 {
			t.Fatalf("round %d: no save acknowledged before the kill", round)
		}
	}
	// A final clean start and stop: the work tree on disk agrees with what
	// the daemon serves, file by file.
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	served := map[string]string{}
	c.StateList(context.Background(), "storm", "", func(r proto.StateRecord) error {
		v, _, err := c.StateLoad(context.Background(), "storm", r.Key)
		if err != nil {
			t.Fatal(err)
		}
		served[r.Key] = string(v)
		return nil
	})
	d.stop()
	for key, v := range served {
		b, err := os.ReadFile(filepath.Join(dir, "data", "repo", "agents", "storm", "state", key))
		if err != nil || string(b) != v {
			t.Fatalf("work tree file %s differs from the served value (%v)", key, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "data", "tmp")); len(ents) != 0 {
		t.Fatalf("temp files left after a clean stop: %d", len(ents))
	}
}
