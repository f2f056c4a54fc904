package wasm

import (
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapMemory backs a guest's linear memory with an anonymous mapping of
// its whole limit, reserved and not committed: growing is handing out
// more of it, where wazero's []byte is copied at each memory.grow (a Go
// guest grows its memory about ten times as it starts). Freed mappings
// are cleared as far as they were used and kept for the next call, so
// that a call neither faults its pages in again nor waits for munmap.
type mmapMemory struct {
	buf  []byte
	used uint64
}

// keepMappings bounds the freed mappings kept for reuse, per size, and
// keepUsed the bytes of one that a guest may have used for it to be kept
// (the pages it touched stay resident).
const (
	keepMappings = 4
	keepUsed     = 16 << 20
)

var mappings = struct {
	sync.Mutex
	free map[int][][]byte // by length
}{free: map[int][][]byte{}}

// mmapAllocator is the experimental.MemoryAllocator of mmapMemory. Where
// the mapping fails, it falls back to the heap.
var mmapAllocator = experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
	if maxBytes == 0 || maxBytes > 1<<32 {
		return &heapMemory{}
	}
	n := int(maxBytes)
	mappings.Lock()
	if l := mappings.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		mappings.free[n] = l[:len(l)-1]
		mappings.Unlock()
		return &mmapMemory{buf: b}
	}
	mappings.Unlock()
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return &heapMemory{}
	}
	return &mmapMemory{buf: b}
})

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	m.used = max(m.used, size)
	return m.buf[:size:size]
}

// Free clears the memory and keeps it, or unmaps it. wazero calls it when
// the module's resources are released, never under a running guest (a
// timeout stops the guest and leaves them to the module's Close).
func (m *mmapMemory) Free() {
	b := m.buf
	if b == nil {
		return
	}
	m.buf = nil
	mappings.Lock()
	keep := m.used <= keepUsed && len(mappings.free[len(b)]) < keepMappings
	mappings.Unlock()
	if keep {
		clear(b[:m.used])
		mappings.Lock()
		if len(mappings.free[len(b)]) < keepMappings {
			mappings.free[len(b)] = append(mappings.free[len(b)], b)
			b = nil
		}
		mappings.Unlock()
	}
	if b != nil {
		syscall.Munmap(b)
	}
}

// heapMemory is wazero's own way, for when mmap fails.
type heapMemory struct{ buf []byte }

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
	} else {
		nb := make([]byte, size, size*2)
		copy(nb, m.buf)
		m.buf = nb
	}
	return m.buf
}

func (m *heapMemory) Free() { m.buf = nil }
