package proto

import (
	"encoding/json"
	"time"
)

// The fleet ops (issue 24): oxiosd hosts joined over NATS.
const (
	// OpFleetStatus lists the nodes of the fleet: node records.
	OpFleetStatus = "fleet.status"
	// OpFleetCall runs one op on another node (or on every node) and
	// streams its records back, each with the node that made it.
	OpFleetCall = "fleet.call"
	// OpFleetWitness checks the local audit chain against the heads of it
	// that the peers saw: witness records, one per peer.
	OpFleetWitness = "fleet.witness"
)

// Record types of the fleet.
const (
	RecordNode    = "node"
	RecordWitness = "witness"
)

// Error codes of the fleet.
const (
	// ENOTCONN: the daemon is not in a fleet (no [fleet] servers). A node
	// that is not there, or stopped answering mid-call, is EHOSTUNREACH.
	ENOTCONN = "ENOTCONN"
)

// FleetAll is the node of FleetCallArgs that means every node.
const FleetAll = "*"

// FleetAny is the node of a placement that means any node with capacity.
const FleetAny = "any"

// FleetCallable are the ops a fleet call may carry. The others act on
// one node's own data in ways a remote caller has no business with.
var FleetCallable = map[string]bool{
	OpRunPs: true, OpEvents: true, OpAuditLog: true, OpAuditHead: true, OpAuditVerify: true,
	OpResources: true, OpStatus: true, OpRunSpawn: true, OpRunAttach: true, OpRunWait: true,
	OpRunKill: true,
}

// NoFleet is the error of fleet op op on a daemon that is in no fleet.
func NoFleet(op string) *Error {
	return Errorf(ENOTCONN, "%s: this oxiosd is not in a fleet (name NATS servers in [fleet] servers of oxios.toml; see oxiosd(8))", op)
}

// Check checks a fleet call's op and node: an op that does not travel is
// refused (refused: the caller audits it); a call without a node is
// invalid.
func (a *FleetCallArgs) Check() (err *Error, refused bool) {
	if !FleetCallable[a.Op] {
		return Errorf(EINVAL, "fleet.call: op %q does not go to other nodes (those that do: ps, events, audit log and tail, resources, status, spawn, attach, wait, kill)", a.Op), true
	}
	if a.Node == "" {
		return Errorf(EINVAL, "fleet.call: no node (a node's name, %q for all, %q for any with capacity)", FleetAll, FleetAny), false
	}
	return nil, false
}

// FleetCallArgs are the args of fleet.call: Op with Args on Node (a name,
// FleetAll, or FleetAny for a spawn).
type FleetCallArgs struct {
	Node string          `json:"node"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// NodeRecord is the "node" record: one node as its last heartbeat told
// the fleet.
type NodeRecord struct {
	Type    string    `json:"type"` // always "node"
	Node    string    `json:"node"`
	Server  string    `json:"server"`
	Started time.Time `json:"started"`
	// Seen is the time of its last heartbeat; Alive is whether it is
	// younger than the fleet's node TTL.
	Seen  time.Time `json:"seen"`
	Alive bool      `json:"alive"`
	Self  bool      `json:"self,omitempty"`
	// AuditSeq and AuditHash are its audit head at that heartbeat.
	AuditSeq  uint64    `json:"audit_seq"`
	AuditHash string    `json:"audit_hash"`
	Admission Admission `json:"admission"`
	Host      Host      `json:"host"`
	// Alarm is what a peer's heads said against the ones this node kept
	// (a head that went back or changed), "" if nothing.
	Alarm string `json:"alarm,omitempty"`
	Text  string `json:"text"`
}

// WitnessRecord is the "witness" record: what one peer holds of the
// local node's audit heads, checked against the local chain.
type WitnessRecord struct {
	Type    string `json:"type"` // always "witness"
	Node    string `json:"node"` // the node whose log was checked
	Witness string `json:"witness"`
	OK      bool   `json:"ok"`
	// Heads is how many heads the witness kept; Checked the newest of
	// them, by seq.
	Heads   int    `json:"heads"`
	Checked uint64 `json:"checked"`
	// FirstBad is the earliest witnessed entry the local chain no longer
	// has as it was (rewritten, or cut off); LastGood the newest one that
	// still matches (the rewrite starts after it).
	FirstBad uint64 `json:"first_bad,omitempty"`
	LastGood uint64 `json:"last_good,omitempty"`
	Problem  string `json:"problem,omitempty"`
	Text     string `json:"text"`
}

// WitnessHead is one audit head a node published: the entry seq and its
// hash, with the time it was seen.
type WitnessHead struct {
	Seq  uint64    `json:"seq"`
	Hash string    `json:"hash"`
	Time time.Time `json:"time"`
}

// OpVersionPush pushes the versioned tree (every agent's history) to a git
// remote: a backup, or the way a tree reaches another host.
const OpVersionPush = "version.push"

// RecordPush is the type of the record of a push.
const RecordPush = "push"

// PushArgs are the args of version.push: Remote is a git URL (ssh://,
// git://, https://, file://, user@host:path) or the path of a repository.
type PushArgs struct {
	Remote string `json:"remote"`
}

// PushRecord is the "push" record: what the remote now has.
type PushRecord struct {
	Type   string `json:"type"` // always "push"
	Remote string `json:"remote"`
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	// UpToDate: the remote had it already.
	UpToDate bool   `json:"up_to_date,omitempty"`
	Text     string `json:"text"`
}

// Home is what a spawn placed on another node carries of its agent's home
// (the node placing it, where the agent lives): the policy the run runs
// under there, and what the agent may still spend. The placing node signs
// it with the call; the node placed on keeps the policy as the agent's,
// a guest's (policy.WithHome), and charges the run's use back to the home
// when it ends (HomeCharge).
type Home struct {
	Agent  string `json:"agent"`
	Policy string `json:"policy"`
	// Left is what the agent may still spend of each limit its home sets
	// (0: the home sets none).
	Left Budget `json:"left"`
	// Run is the id the run takes on the node placed on: the home chose
	// it and noted the placement (node, run) before the call, and takes
	// a charge only for a run it placed, from the node it placed it on.
	Run string `json:"run,omitempty"`
}

// HomeCharge is what a node that ran a guest's run charges to the agent's
// home: the run's use, once, when it ended.
type HomeCharge struct {
	Agent string `json:"agent"`
	Run   string `json:"run"`
	Used  Budget `json:"used"`
}

// HomeCharged is the home's answer to a HomeCharge: Already when it had
// the charge before (sent again after an answer that was lost), and did
// not count it twice.
type HomeCharged struct {
	Already bool `json:"already,omitempty"`
}
