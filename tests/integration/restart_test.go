package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// TestServesOnceReady: a client that connects while oxiosd starts gets
// its hello only once every subsystem is ready: the first schedule.list
// after a restart lists the jobs, never ESHUTDOWN (issue 45: 6 of 35
// restarts answered it while the socket already served). The window was
// narrow: this guards the order, it did not catch the old one here.
func TestServesOnceReady(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	// Jobs enough that starting the scheduler takes a while.
	const jobs = 100
	for i := range jobs {
		if _, err := c.ScheduleAdd(ctx, proto.ScheduleAddArgs{Agent: fmt.Sprintf("ops%d", i%20), Name: fmt.Sprintf("nightly%d", i), Schedule: "@daily", Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	d.stop()
	for round := range 3 {
		sock := filepath.Join(dir, "oxiosd.sock")
		cmd := exec.Command(bin("oxiosd"), "--data", filepath.Join(dir, "data"), "--socket", sock, "--no-mount", "--config", "")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first connection that gets a hello asks at once.
		var cl *client.Client
		for deadline := time.Now().Add(60 * time.Second); cl == nil; {
			var err error
			if cl, err = client.Dial(ctx, sock); err != nil {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("round %d: no hello: %v", round, err)
				}
				time.Sleep(time.Millisecond)
			}
		}
		n := 0
		err := cl.ScheduleList(ctx, "", func(proto.JobRecord) error { n++; return nil })
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code == proto.ESHUTDOWN || err != nil || n != jobs {
			t.Errorf("round %d: the first schedule.list after the start: %d jobs, %v", round, n, err)
		}
		cl.Close()
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
}
