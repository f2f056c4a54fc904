// Package proto holds the wire types of the Oxios protocol: JSON lines over
// a Unix socket, spoken by oxiosd and every ox-* client alike.
//
// A connection opens with one line from the daemon, the hello:
//
//	{"hello":{"proto":1,"server":"oxiosd/0.1.0","max_line":23134208,"uid":1000,"admin":true}}
//
// Then the client sends requests, one per line, and may pipeline them:
//
//	{"id":7,"op":"state.save","args":{"agent":"ops","key":"notes/today.md","value":"hi"}}
//
// Each request gets exactly one final reply carrying its id, in completion
// order (not necessarily request order):
//
//	{"id":7,"ok":true,"result":{...}}
//	{"id":7,"ok":false,"error":{"code":"ENOENT","message":"..."}}
//
// A streaming op (state.list, and later tail, subscribe, attach) sends zero
// or more item lines before its final reply:
//
//	{"id":7,"item":{...}}
//	{"id":7,"ok":true,"done":true}
//
// A line the daemon cannot read (malformed, oversized, unknown op) gets an
// error reply naming the problem, with the request's id when it could be
// recovered and 0 otherwise; the connection keeps serving.
package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Version is the protocol version. A client refuses a daemon whose hello
// carries a different one.
const Version = 1

// Request is one line from client to daemon.
type Request struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Reply is one line from daemon to client: a hello, a stream item or a
// final reply (OK with Result, or not OK with Error).
type Reply struct {
	ID     uint64          `json:"id"`
	OK     bool            `json:"ok"`
	Done   bool            `json:"done,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Item   json.RawMessage `json:"item,omitempty"`
	Error  *Error          `json:"error,omitempty"`
	Hello  *Hello          `json:"hello,omitempty"`
}

// Hello is the daemon's first line on every connection.
type Hello struct {
	Proto   int    `json:"proto"`
	Server  string `json:"server"`
	MaxLine int    `json:"max_line"`
	// MaxValue is the largest state value the daemon accepts, so a client
	// can refuse a larger one before sending it.
	MaxValue int    `json:"max_value"`
	UID      uint32 `json:"uid"`
	PID      int32  `json:"pid,omitempty"`
	Admin    bool   `json:"admin"`
	Agent    string `json:"agent,omitempty"`
}

// Error is an errno-style failure. Code is an errno name (ENOENT, EPERM,
// ...); Message says what went wrong in words a user can act on.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message + " (" + e.Code + ")" }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Result is the audit result of err: "ok" for nil, the errno name of
// an *Error, else EIO.
func Result(err error) string {
	if err == nil {
		return "ok"
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return EIO
}

// AsError is err as the wire has it: err itself when it is an *Error
// (or wraps one), else EIO with err's words.
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	if OutOfSpace(err) {
		return Errorf(ENOSPC, "%v", err)
	}
	return Errorf(EIO, "%v", err)
}

// OutOfSpace reports whether err is a file system out of space or quota
// (ENOSPC, EDQUOT), wrapped or only in its words (a library that wraps
// errors with %v): such a failure is the wire's ENOSPC, not EIO.
func OutOfSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// Error codes used on the wire. They are errno names so that scripts and
// the FUSE layer can map them without a table of our own.
const (
	EINVAL       = "EINVAL"       // bad argument (agent name, key, encoding)
	ENOENT       = "ENOENT"       // no such key or agent
	EEXIST       = "EEXIST"       // already exists
	ENOTDIR      = "ENOTDIR"      // a prefix of the key is itself a value
	EISDIR       = "EISDIR"       // the key is a prefix of other keys
	EPERM        = "EPERM"        // not permitted by policy
	EACCES       = "EACCES"       // identity not granted access
	E2BIG        = "E2BIG"        // value larger than the configured maximum
	EMSGSIZE     = "EMSGSIZE"     // request line larger than max_line
	ENAMETOOLONG = "ENAMETOOLONG" // key or name too long
	EBADMSG      = "EBADMSG"      // request line is not a valid request
	ENOSYS       = "ENOSYS"       // unknown op
	EPROTO       = "EPROTO"       // protocol version mismatch
	ESHUTDOWN    = "ESHUTDOWN"    // daemon is shutting down
	EIO          = "EIO"          // storage failed
	EDQUOT       = "EDQUOT"       // over budget or quota
	ESRCH        = "ESRCH"        // no such run, or it has exited
	ENOEXEC      = "ENOEXEC"      // no model endpoint to run an LLM agent with
	ECANCELED    = "ECANCELED"    // an LLM run ended by a signal (records only)
	EHOSTDOWN    = "EHOSTDOWN"    // the model endpoint failed (records only)
	ELOOP        = "ELOOP"        // an LLM run reached its turn limit (records only)
	EROFS        = "EROFS"        // a read-only file of the mount (a policy)
	EAGAIN       = "EAGAIN"       // forks refused at a run's process limit (audit only)
	ENOMEM       = "ENOMEM"       // a run's memory limit reached (audit only)
	ENOBUFS      = "ENOBUFS"      // the daemon's memory for request lines is in use (limits.max_buffered)
	ENOSPC       = "ENOSPC"       // the disk holding the data is full: writes refused, reads served
	EUSERS       = "EUSERS"       // too many connections (limits.max_conns, limits.max_conns_per_uid)
)

// Ops. Each is one kernel syscall.
const (
	OpHello       = "hello"
	OpStateSave   = "state.save"
	OpStateLoad   = "state.load"
	OpStateDelete = "state.delete"
	OpStateList   = "state.list"
	OpStateStat   = "state.stat"
)

// HelloArgs lets a client say who it is; the daemon answers with its Hello.
type HelloArgs struct {
	Proto  int    `json:"proto"`
	Client string `json:"client,omitempty"`
}

// EmitAll calls emit with each of recs in order, and stops at the first
// error, which it returns: how a syscall streams the records it listed.
func EmitAll[T any](recs []T, emit func(*T) error) error {
	for i := range recs {
		if err := emit(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}
